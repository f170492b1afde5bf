"""The invariant Predictor against plain batched eager, and backend="auto" against every fixed
backend, side by side in one run per model (issue #18).

Run: python bench/backend_auto.py [--models demo:mlp,demo:cnn,bert,resnet18] [--rounds 15]
Targets: invariant eager Predictor >= 0.98x plain batched eager at batch 32/64/256 (or the cost
printed and explained where a small tile is forced); backend="auto" >= 0.97x the best fixed
backend at every batch size. "best same" is the fastest fixed backend with eager's bits (what
auto may choose without allow_backend_drift), "best any" the fastest of all. `resnet18` is the ResNet-18-sized CNN of bench/resnet.py at 64x64
inputs (224x224 would make the calibration up to batch 256 take minutes on 2 cores); `bert` is
the tiny transformers BERT of the real-model suite (tests/real_models.py); `tv_resnet18` is
torchvision's resnet18 (random weights, 64x64), for a venv where torchvision imports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

import samebits
from samebits.measure.batching import concat_batches, random_neighbour, take_sample
from samebits.measure.timing import median_seconds
from samebits.models import ModelInputs

HERE = Path(__file__).resolve().parent
FIXED = ("eager", "torchscript", "export", "onnxruntime")


def build(name: str) -> tuple[torch.nn.Module, ModelInputs]:
    if name.startswith("demo:"):
        loaded = samebits.load_model(name)
        return loaded.model.eval(), ModelInputs.from_example(loaded.example_inputs)
    if name == "bert":
        sys.path.insert(0, str(HERE.parent / "tests"))
        from real_models import bert

        model, inputs = bert()
        return model, ModelInputs((), inputs)
    if name == "resnet18":
        sys.path.insert(0, str(HERE))
        from resnet import resnet18

        model, _ = resnet18()
        return model, ModelInputs((torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)),), {})
    if name == "tv_resnet18":  # torchvision's own, random weights (run this in a venv with torchvision)
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet18(weights=None).eval()
        return model, ModelInputs((torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)),), {})
    raise SystemExit(f"unknown model {name}")


def bench_model(name: str, sizes: tuple[int, ...], rounds: int, cache: str) -> list[str]:
    model, example = build(name)
    made: dict[str, samebits.Predictor] = {}
    seconds: dict[str, float] = {}
    for backend in (*FIXED, "auto"):
        start = time.monotonic()
        try:
            made[backend] = samebits.Predictor(
                model, example_inputs=example, backend=backend, cache_dir=cache, deterministic=False
            )
        except samebits.UserError as exc:
            print(f"  {backend}: skipped ({str(exc)[:100]})")
        seconds[backend] = time.monotonic() - start
    auto = made["auto"]
    print(f"\n{name}: built in " + ", ".join(f"{b} {s:.1f} s" for b, s in seconds.items() if b in made))
    print(f"  eager verified {made['eager'].invariance.sizes}; {auto.notes[0]}")
    for note in made["eager"].notes:
        print(f"  eager: {note}")
    sample = take_sample(example, 0)
    gen = torch.Generator().manual_seed(1)
    pool = [sample] + [random_neighbour(sample, gen) for _ in range(max(sizes) - 1)]
    lines = []
    for n in sizes:
        batch = concat_batches(pool[:n])

        def plain() -> None:
            with torch.inference_mode():
                batch.call(model)

        fns = {"plain": plain, **{b: (lambda p=p: p.predict(batch)) for b, p in made.items()}}
        t = median_seconds(fns, rounds=rounds, budget=30)
        fixed = {b: t[b] for b in FIXED if b in t}
        same = {
            b: v for b, v in fixed.items() if b == "eager" or (b in auto.auto.drift and auto.auto.drift[b].identical)
        }
        best, best_same = min(fixed, key=fixed.__getitem__), min(same, key=same.__getitem__)
        lines.append(
            f"{name:>10} {n:>5} {n / t['plain']:>11,.0f} "
            + " ".join(f"{n / t[b]:>11,.0f}" if b in t else f"{'-':>11}" for b in (*FIXED, "auto"))
            + f" {t['plain'] / t['eager']:>9.2f} {best_same:>11} {t[best_same] / t['auto']:>8.2f}"
            + f" {best:>11} {t[best] / t['auto']:>8.2f}"
        )
        print(lines[-1])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="demo:mlp,demo:cnn,bert,resnet18")
    parser.add_argument("--sizes", default="32,64,256")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    cache = tempfile.mkdtemp(prefix="samebits-bench-auto-")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; samples/s, interleaved medians")
    head = (
        f"{'model':>10} {'batch':>5} {'plain eager':>11} "
        + " ".join(f"{b:>11}" for b in (*FIXED, "auto"))
        + f" {'inv/plain':>9} {'best same':>11} {'auto/it':>8} {'best any':>11} {'auto/it':>8}"
    )
    out = []
    for name in args.models.split(","):
        out += bench_model(name, sizes, args.rounds, cache)
    print("\n" + head)
    print("\n".join(out))


if __name__ == "__main__":
    main()
