"""Capture the verdict, origin and causes of `samebits check` (all default axes) on every model
of the suite, as a baseline that tests/test_check_baseline.py compares later implementations with.

Run: python tests/baselines/capture_check.py  (writes tests/baselines/check.json). Re-run it only
when a change of verdict is intended, and say why in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))

import samebits  # noqa: E402

CHECK_MODELS = [
    "clean",
    "dropout_on",
    "torch_noise",
    "numpy_noise",
    "python_noise",
    "hash_order",
    "batch_variant",
    "bn_train",
    "shape_changes",
    "labels",
    "wide",
    "wide_no_grad",
]
REAL_MODELS = ["gpt2", "gpt2_no_cache", "gpt2_decode", "bert", "t5", "vit", "detector"]
DEMOS = ["demo:mlp", "demo:cnn", "demo:transformer", "demo:detector"]


def specs() -> dict[str, str]:
    out = {d: d for d in DEMOS}
    out.update({f"check_models:{n}": f"{TESTS / 'check_models.py'}:{n}" for n in CHECK_MODELS})
    out.update({f"real_models:{n}": f"{TESTS / 'real_models.py'}:{n}" for n in REAL_MODELS})
    return out


def summary(report) -> dict:
    """What must stay the same: each axis's verdict and origin module, and the cause codes."""
    return {
        "axes": {a.axis: [a.verdict, a.origin.module if a.origin else None] for a in report.axes},
        "causes": sorted(c.code for c in report.causes),
    }


def cpu_kind() -> str:
    """ATen's capability and the CPU's vendor: machines of one kind run the same GEMM kernels."""
    from samebits.fingerprint import Fingerprint

    model = Fingerprint.capture().to_dict()["cpu"]["model"] or ""
    vendor = next((v for v in ("AMD", "Intel") if v in model), model)
    return f"{torch.backends.cpu.get_cpu_capability()} {vendor}"


def main() -> None:
    result = {"cpu_kind": cpu_kind(), "torch": torch.__version__, "models": {}}
    for name, spec in specs().items():
        print(name, flush=True)
        result["models"][name] = summary(samebits.check(spec))
    (HERE / "check.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
