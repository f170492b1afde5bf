"""What ``samebits.batch_invariant()`` costs against plain eager, and against the calibrated
Predictor (the other way to keep a row's bits), side by side in one run.

Run: python bench/batch_invariant.py [--rounds 15]
Per model and batch size: plain eager (a row's bits change with the batch on this CPU), eager
inside batch_invariant() (the tiles), the calibrated invariant Predictor, each as samples/s with
the tiled and Predictor throughput as a ratio of plain, taken within interleaved rounds (median,
lowest-highest), and whether row 0 kept the bits it gets alone. Target (issue #26): tiles >= 0.98x
plain, or say by how much they miss.
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from torch import nn

import samebits
from samebits.measure.timing import interleaved_times


def medium_mlp() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    return model.eval(), torch.randn(1, 512)


def models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    out = {"medium MLP": medium_mlp()}
    for spec in ("demo:mlp", "demo:cnn", "demo:transformer"):
        loaded = samebits.load_model(spec)
        example = loaded.example_inputs
        assert example is not None
        out[spec] = (loaded.model.eval(), example.args[0][:1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="samebits-bench-")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU {torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        f"{'model':<17} {'batch':>5} {'plain/s':>9} {'tiles/s':>9} {'tiles vs plain':>24} {'Predictor vs plain':>24}  row 0 alone: plain/tiles"
    )
    for name, (model, one) in models().items():
        gen = torch.Generator().manual_seed(1)
        if one.is_floating_point():
            pool = torch.cat([one, torch.randn(63, *one.shape[1:], generator=gen)])
        else:
            pool = torch.cat([one, torch.randint(3, 100, (63, *one.shape[1:]), generator=gen)])
        predictor = samebits.Predictor(model, example_inputs=pool[:4], cache_dir=cache, deterministic=False)
        with torch.inference_mode():
            alone_plain = model(pool[:1])
            with samebits.batch_invariant():
                alone_tiled = model(pool[:1])
        for n in (1, 8, 32, 64):
            batch = pool[:n]

            def plain() -> object:
                with torch.inference_mode():
                    return model(batch)

            def tiled() -> object:
                with torch.inference_mode(), samebits.batch_invariant():
                    return model(batch)

            times = interleaved_times(
                {"plain": plain, "tiles": tiled, "predictor": lambda: predictor.predict(batch)},
                rounds=args.rounds,
                budget=6,
            )
            tiles, calibrated = times.ratio("tiles", "plain"), times.ratio("predictor", "plain")
            # as throughput against plain: seconds(plain) / seconds(config)
            tiles_text = f"{1 / tiles.median:.2f}x ({1 / tiles.high:.2f}-{1 / tiles.low:.2f})"
            pred_text = f"{1 / calibrated.median:.2f}x ({1 / calibrated.high:.2f}-{1 / calibrated.low:.2f})"
            same_plain = torch.equal(plain()[0], alone_plain[0])  # type: ignore[index]
            same_tiled = torch.equal(tiled()[0], alone_tiled[0])  # type: ignore[index]
            print(
                f"{name:<17} {n:>5} {n / times.median('plain'):>9,.0f} {n / times.median('tiles'):>9,.0f} "
                f"{tiles_text:>24} {pred_text:>24}  {'yes' if same_plain else 'no'}/{'yes' if same_tiled else 'no'}"
            )
        predictor.close()
    print(f"load while timing: {times.load.describe()}")


if __name__ == "__main__":
    main()
