"""How long `samebits check` takes with all default axes, and what the hooks cost.

Run: python bench/check_speed.py [--quick]

Targets (issue #13), all ratios measured side by side in this one run:
- a hooked forward (traced_forward) <= 1.2x a plain one on ResNet-18, <= 1.5x on the demos;
- `samebits check demo:mlp` (the CLI, all default axes) <= 2.5x one fresh
  `python -c "import samebits, torch"`;
- check on ResNet-18 @224, batch 2 <= 40x its plain forward.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from samebits.checker import check
from samebits.measure.trace import plain_forward, traced_forward
from samebits.models import load_model

HERE = Path(__file__).resolve().parent
RESNET = f"{HERE / 'resnet.py'}:resnet18"
NAMES = {RESNET: "resnet18 @224 (b=2)"}


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def forward_seconds(spec: str, repeats: int) -> tuple[float, float]:
    """Median seconds of a plain and of a hooked forward, interleaved so that load hits both."""
    loaded = load_model(spec)
    model, inputs = loaded.model, loaded.example_inputs
    plain = median_seconds(lambda: plain_forward(model, inputs), repeats)
    hooked = median_seconds(lambda: traced_forward(model, inputs), repeats)
    plain = min(plain, median_seconds(lambda: plain_forward(model, inputs), repeats))
    return plain, hooked


def fresh_seconds(argv: list[str], repeats: int = 3) -> float:
    return median_seconds(lambda: subprocess.run(argv, check=False, capture_output=True), repeats)


def main() -> None:
    quick = "--quick" in sys.argv
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print(f"{'model':<22}{'plain forward':>15}{'with hooks':>13}{'ratio':>8}  target")
    forwards = {}
    for spec, target in (("demo:mlp", 1.5), ("demo:cnn", 1.5), ("demo:transformer", 1.5), (RESNET, 1.2)):
        plain, hooked = forward_seconds(spec, 5 if spec == RESNET else 50)
        forwards[spec] = plain
        print(
            f"{NAMES.get(spec, spec):<22}{plain * 1e3:>12.2f} ms{hooked * 1e3:>10.2f} ms{hooked / plain:>8.2f}  <= {target}"
        )

    imported = fresh_seconds([sys.executable, "-c", "import samebits, torch"])
    cli = fresh_seconds([sys.executable, "-m", "samebits", "check", "demo:mlp"], repeats=3)
    print(f"\nfresh `import samebits, torch`: {imported:.2f} s; `samebits check demo:mlp` (CLI): {cli:.2f} s")
    print(f"  ratio {cli / imported:.2f}  (target <= 2.5)")

    print(f"\n{'check(), all default axes':<24}{'wall':>7}  per axis (s)")
    for spec in ["demo:mlp", "demo:cnn", "demo:transformer"] + ([] if quick else [RESNET]):
        t = time.perf_counter()
        report = check(spec)
        wall = time.perf_counter() - t
        axes = "  ".join(f"{a.axis} {a.seconds:.2f}" for a in report.axes)
        ratio = f"  = {wall / forwards[spec]:.0f}x its plain forward (target <= 40)" if spec == RESNET else ""
        print(f"{NAMES.get(spec, spec):<24}{wall:>6.1f}s  {axes}{ratio}")
        print(f"{'':<24}verdicts: {' '.join(f'{a.axis}={a.verdict}' for a in report.axes)}")


if __name__ == "__main__":
    main()
