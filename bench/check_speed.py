"""How long `samebits check` takes with all default axes, and what the hooks cost.

Run: python bench/check_speed.py [--quick]
Targets (issue #3): demo model <= 20 s wall on 2 cores; a ResNet-18-size CNN at 224x224 <= 60 s;
hooks <= 1.5x a plain forward. Ratios are measured side by side in this one run.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from samebits.checker import check
from samebits.models import load_model
from samebits.measure.trace import plain_forward, traced_forward

HERE = Path(__file__).resolve().parent
RESNET = f"{HERE / 'resnet.py'}:resnet18"


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def hook_ratio(spec: str, repeats: int) -> tuple[float, float]:
    loaded = load_model(spec)
    model, inputs = loaded.model, loaded.example_inputs
    plain = median_seconds(lambda: plain_forward(model, inputs), repeats)
    hooked = median_seconds(lambda: traced_forward(model, inputs), repeats)
    return plain, hooked


def main() -> None:
    quick = "--quick" in sys.argv
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print(f"{'model':<22}{'plain forward':>15}{'with hooks':>13}{'ratio':>8}  (target <= 1.5)")
    for spec in ("demo:mlp", "demo:cnn", "demo:transformer", RESNET):
        plain, hooked = hook_ratio(spec, 5 if spec == RESNET else 20)
        name = "resnet18 @224 (b=2)" if spec == RESNET else spec
        print(f"{name:<22}{plain * 1e3:>12.2f} ms{hooked * 1e3:>10.2f} ms{hooked / plain:>8.2f}")
    print(f"\n{'check, all default axes':<30}{'wall':>8}  target")
    for spec, target in [("demo:mlp", 20), ("demo:cnn", 20)] + ([] if quick else [(RESNET, 60)]):
        t = time.perf_counter()
        report = check(spec)
        wall = time.perf_counter() - t
        name = "resnet18 @224 (b=2)" if spec == RESNET else spec
        slowest = max(report.axes, key=lambda a: a.seconds)
        print(
            f"{name:<30}{wall:>7.1f}s  <= {target} s   verdicts: {' '.join(f'{a.axis}={a.verdict}' for a in report.axes)}; slowest axis {slowest.axis} {slowest.seconds:.1f}s"
        )


if __name__ == "__main__":
    main()
