"""What the portable levels cost: forward throughput of each model natively, under x86-64-v3 and
under x86-64-v2, and on a simulated AVX2 CPU unpinned (this CPU capped to AVX2 without MKL's CNR
mode: what x86-64-v3 costs on a CPU whose best is AVX2), each in a fresh process (the libraries read the level when they load), in
interleaved rounds (each round runs every level once, in a rotated order), as ratios to native
within a round. Issue #27; the table in docs/portable.md comes from here.

Run: python bench/portable_cost.py [--models demo:mlp,demo:cnn,demo:transformer,bert,resnet18,medium_mlp]
     [--rounds 3] [--batch 32] [--seconds 1.5]
`resnet18` is bench/resnet.py's ResNet-18-sized CNN at 64x64; `bert` the tiny transformers BERT of
tests/real_models.py; `medium_mlp` bench/serve_models.py's 512-2048-2048-10 MLP.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = "demo:mlp,demo:cnn,demo:transformer,bert,resnet18,medium_mlp"
LEVEL_NAMES = ("native", "x86-64-v3", "x86-64-v2")
AVX2_CPU = "avx2-cpu"  # this CPU capped to x86-64-v3's instruction sets, unpinned


def build(name: str, batch: int):
    """(model, inputs of ``batch`` rows) for ``name``."""
    import torch

    import samebits
    from samebits.measure.batching import concat_batches, random_neighbour, take_sample
    from samebits.models import ModelInputs

    if name.startswith("demo:"):
        loaded = samebits.load_model(name)
        model, example = loaded.model, ModelInputs.from_example(loaded.example_inputs)
    elif name == "bert":
        sys.path.insert(0, str(HERE.parent / "tests"))
        from real_models import bert

        model, kwargs = bert()
        example = ModelInputs((), kwargs)
    elif name == "resnet18":
        sys.path.insert(0, str(HERE))
        from resnet import resnet18

        model, _ = resnet18()
        example = ModelInputs((torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)),), {})
    elif name == "medium_mlp":
        sys.path.insert(0, str(HERE))
        from serve_models import medium_mlp

        model, x = medium_mlp()
        example = ModelInputs((x,), {})
    else:
        raise SystemExit(f"unknown model {name}")
    sample = take_sample(example, 0)
    gen = torch.Generator().manual_seed(1)
    rows = [sample] + [random_neighbour(sample, gen) for _ in range(batch - 1)]
    return model.eval(), concat_batches(rows)


def child(name: str, batch: int, seconds: float) -> None:
    """In a fresh process: samples per second of ``name`` at ``batch`` rows (median of the calls)."""
    import torch

    model, inputs = build(name, batch)
    with torch.inference_mode():
        for _ in range(3):
            inputs.call(model)
        times, start = [], time.perf_counter()
        while len(times) < 5 or time.perf_counter() - start < seconds:
            t = time.perf_counter()
            inputs.call(model)
            times.append(time.perf_counter() - t)
    print(json.dumps({"rate": batch / statistics.median(times), "capability": torch.backends.cpu.get_cpu_capability()}))


def environment(level: str) -> dict[str, str]:
    from samebits.determinism.portable import CODE_PATH_VARS, LEVELS

    env = {k: v for k, v in os.environ.items() if k not in CODE_PATH_VARS}
    pins = LEVELS["x86-64-v3"].machine if level == AVX2_CPU else LEVELS[level].env
    return {**env, **pins, "PYTHONHASHSEED": "0"}


def measure(name: str, level: str, batch: int, seconds: float) -> float:
    command = [sys.executable, __file__, "--child", name, "--batch", str(batch), "--seconds", str(seconds)]
    done = subprocess.run(command, env=environment(level), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{name} under {level} failed: {done.stderr.strip()[-400:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=1.5, help="timed seconds per process")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.batch, args.seconds)
    from samebits.determinism.portable import cpu_flags, level

    levels = [n for n in LEVEL_NAMES if _runs(level, n, cpu_flags())]
    pairs = [(n, "native") for n in levels[1:]]
    if "x86-64-v3" in levels:
        levels.append(AVX2_CPU)
        pairs.append(("x86-64-v3", AVX2_CPU))
    print(f"batch {args.batch}, {args.rounds} rounds, {os.cpu_count()} cores, load before {os.getloadavg()[0]:.2f}")
    print("| model | native samples/s | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " |")
    print("|---|---|" + "---|" * len(pairs))
    for name in args.models.split(","):
        rates: dict[str, list[float]] = {n: [] for n in levels}
        for r in range(args.rounds):
            order = levels[r % len(levels) :] + levels[: r % len(levels)]  # rotated: no level always first
            for n in order:
                rates[n].append(measure(name, n, args.batch, args.seconds))
        ratios = [[x / y for x, y in zip(rates[a], rates[b])] for a, b in pairs]
        cells = [f"{statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})" for v in ratios]
        native = rates["native"]
        print(
            f"| {name} | {statistics.median(native):,.0f} ({min(native):,.0f}-{max(native):,.0f}) | "
            + " | ".join(cells)
            + " |",
            flush=True,
        )
    print(f"load after {os.getloadavg()[0]:.2f}")


def _runs(level, name: str, flags: set[str]) -> bool:
    try:
        level(name, flags)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    main()
