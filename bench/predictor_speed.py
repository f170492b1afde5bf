"""Predictor throughput and memory against plain eager, side by side in one run.

Run: python bench/predictor_speed.py
Targets (issue #5): invariant eager Predictor >= 0.90x plain batched eager at batch >= 32 on
demo:mlp; ONNX Runtime Predictor invariant and >= 2x plain eager; Predictor overhead with
invariance off <= 3% vs a bare model(batch) under inference_mode at batch 32; map() over 10,000
samples grows RSS by <= 5%.
"""

from __future__ import annotations

import tempfile

import torch

import samebits
from samebits.measure.memory import rss_mb
from samebits.measure.timing import median_seconds


def main() -> None:
    cache = tempfile.mkdtemp(prefix="samebits-bench-")
    loaded = samebits.load_model("demo:mlp")
    model = loaded.model
    eager_inv = samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False)
    eager_off = samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False, invariant=False)
    ort = samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False, backend="onnxruntime", tile=32)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; eager invariance {eager_inv.invariance.scheme} {eager_inv.invariance.sizes}; onnxruntime tile {ort.invariance.sizes}\n"
    )
    print(
        f"{'batch':>6} {'plain eager':>14} {'invariant':>11} {'ratio':>7} {'inv. off':>10} {'overhead':>9} {'onnxruntime':>12} {'ratio':>7}"
    )
    for n in (32, 64, 256):
        x = torch.randn(n, 256)

        def plain() -> None:
            with torch.inference_mode():
                model(x)

        t = median_seconds(
            {
                "plain": plain,
                "inv": lambda: eager_inv.predict(x),
                "off": lambda: eager_off.predict(x),
                "ort": lambda: ort.predict(x),
            },
            rounds=30,
            budget=10,
        )
        rate = {k: n / v for k, v in t.items()}
        print(
            f"{n:>6} {rate['plain']:>10,.0f}/s {rate['inv']:>9,.0f}/s {rate['inv'] / rate['plain']:>7.2f} {rate['off']:>8,.0f}/s "
            f"{t['off'] / t['plain'] - 1:>8.1%} {rate['ort']:>10,.0f}/s {rate['ort'] / rate['plain']:>7.2f}"
        )
    x = torch.randn(64, 256)
    a = ort.predict(x)
    print(f"\nonnxruntime invariant: row 5 alone == in a batch of 64: {torch.equal(ort.predict_one(x[5]), a[5])}")
    samples = torch.randn(10_000, 256)
    for _ in eager_inv.map(samples[:500], batch_size=64):
        pass
    before = rss_mb()
    count = sum(1 for _ in eager_inv.map(samples, batch_size=64))
    after = rss_mb()
    print(f"map over {count:,} samples: RSS {before:.0f} MB -> {after:.0f} MB ({(after - before) / before:+.1%})")


if __name__ == "__main__":
    main()
