"""samebits: reproducible, fast, memory-safe PyTorch inference, and the proof.

*Same input, same bits.* The public API is imported lazily, so that ``import samebits`` and the
CLI's ``--help`` do not pay for importing torch.
"""

from __future__ import annotations

from samebits._lazy import lazy_getattr
from samebits._version import __version__

_EXPORTS = {
    "deterministic": "samebits.determinism",
    "fast": "samebits.determinism",
    "seed_everything": "samebits.determinism",
    "isolate_rng": "samebits.determinism",
    "dataloader_kwargs": "samebits.determinism",
    "worker_init_fn": "samebits.determinism",
    "DeterminismRecord": "samebits.determinism",
    "Fingerprint": "samebits.fingerprint",
    "flatten": "samebits.tensors",
    "register_node": "samebits.tensors",
    "digest": "samebits.tensors",
    "digest_tree": "samebits.tensors",
    "compare": "samebits.tensors",
    "tolerances_for": "samebits.tensors",
    "load_model": "samebits.models",
    "ModelInputs": "samebits.models",
    "record": "samebits.golden",
    "verify": "samebits.golden",
    "Predictor": "samebits.runtime",
    "check": "samebits.checker",
    "lint": "samebits.linter",
    "doctor": "samebits.diagnosis",
    "bench": "samebits.runtime.bench",
    "UserError": "samebits.errors",
    "SamebitsError": "samebits.errors",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)
