"""`samebits predict` against a hand-written loop, 2 workers against 1, and memory over 100k samples.

Run: python bench/predict_speed.py [--quick] [--long]

Targets (issue #15), ratios measured side by side in this one run on the same input files:
- samples/s of `samebits.offline.predict` >= 0.95x a hand loop (demo:mlp, demo:cnn, the medium
  MLP, the small CNN, BERT) (`for batch in loader:
  model(batch)` under inference_mode, the same batch size), with per-sample bits that do not
  depend on the batch size; the loop is also timed writing its outputs as samebits does;
- the hand loop is also timed under `samebits.deterministic()` (the switches the Predictor sets):
  the gap between the two loops is the cost of the deterministic profile, not of predict;
- `--workers 2` against `--workers 1` (reported);
- RSS growth <= 5% over 100k samples of demo:mlp (baseline: RSS after the first 1,000).
"""

from __future__ import annotations

import os

# As `samebits predict` starts (samebits.determinism.strict_blas), before the first GEMM; the hand
# loop runs under it too (measured: it costs nothing at 2 threads, 0.63 vs 0.67 ms on demo:mlp).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from samebits.determinism import deterministic
from samebits.models import ModelInputs, load_model
from samebits.offline import predict

HERE = Path(__file__).resolve().parent


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def write_inputs(folder: Path, example: ModelInputs, samples: int, files: int) -> None:
    """``files`` input files of ``samples`` in all, shaped like ``example``: one positional tensor
    as ``.npy`` (random normal), keyword inputs as ``.safetensors`` (the example's rows cycled,
    integer ids drawn afresh where the example is not 0, so a padding mask keeps its zeros)."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    per = samples // files
    first = example.args[0] if example.args else None
    for i in range(files):
        if first is not None:
            np.save(folder / f"part{i:03d}.npy", torch.randn(per, *first.shape[1:], generator=gen).numpy())
            continue
        rows = torch.arange(per) % len(next(iter(example.kwargs.values())))
        part = {}
        for name, t in example.kwargs.items():
            t = t[rows]
            if not t.is_floating_point() and "mask" not in name:
                t = torch.randint(1, int(t.max()) + 1, t.shape, generator=gen) * (t != 0)
            part[name] = t.contiguous()
        save_file(part, str(folder / f"part{i:03d}.safetensors"))


def _load(path: Path) -> tuple[tuple, dict]:
    if path.suffix == ".npy":
        return (torch.from_numpy(np.load(path)),), {}
    from safetensors.torch import load_file

    return (), load_file(str(path))


def _tensors(output) -> dict:
    """An output's tensors by name (a tensor, or a dict-like output such as transformers')."""
    return (
        {"output": output}
        if isinstance(output, torch.Tensor)
        else {k: v for k, v in output.items() if isinstance(v, torch.Tensor)}
    )


def hand_loop(model: torch.nn.Module, folder: Path, batch: int, out: Path | None) -> int:
    """What people write: load each file, cut it into batches, run them (and save, if ``out``)."""
    from safetensors.torch import save_file

    done = 0
    with torch.inference_mode():
        for i, path in enumerate(sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".safetensors"))):
            args, kwargs = _load(path)
            n = len((*args, *kwargs.values())[0])
            outputs = [
                _tensors(model(*(x[a : a + batch] for x in args), **{k: v[a : a + batch] for k, v in kwargs.items()}))
                for a in range(0, n, batch)
            ]
            if out is not None:
                save_file(
                    {k: torch.cat([o[k] for o in outputs]).contiguous() for k in outputs[0]},
                    str(out / f"part{i:03d}.safetensors"),
                )
            done += n
    return done


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def speed(spec: str, samples: int, batch: int, repeats: int, root: Path) -> None:
    loaded = load_model(spec)
    model = loaded.model.eval()
    example = ModelInputs.from_example(loaded.example_inputs)
    folder = root / f"in-{Path(spec).name.replace(':', '-')}"
    folder.mkdir()
    write_inputs(folder, example, samples, 10)
    shard = samples // 10
    cache = root / "cache"

    def run_predict(workers: int, half: bool = False, threads: int | None = None) -> dict:
        out = root / "out"
        shutil.rmtree(out, ignore_errors=True)
        inputs = [str(p) for p in sorted(folder.iterdir())]
        inputs = inputs[: len(inputs) // 2] if half else inputs
        predict(
            spec,
            inputs,
            out,
            batch_size=batch,
            shard_size=shard,
            workers=workers,
            threads_per_worker=threads,
            cache_dir=cache,
        )
        return json.loads((out / "manifest.json").read_text())["threads"]

    def run_loop(save: bool, build: bool = False) -> None:
        out = root / "loop"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        hand_loop(load_model(spec).model.eval() if build else model, folder, batch, out if save else None)

    plan = run_predict(1)  # calibration cached, as for any second run
    cores = os.cpu_count() or 1
    run_predict(1, threads=cores)
    loop = timed(lambda: run_loop(False), repeats)
    loop_save = timed(lambda: run_loop(True), repeats)
    program = timed(lambda: run_loop(True, build=True), repeats)  # the whole script: build the model too
    with deterministic(0):  # the switches the Predictor sets (oneDNN deterministic mode, ...)
        loop_det = timed(lambda: run_loop(True), repeats)
    one = timed(lambda: run_predict(1), repeats)
    half = timed(lambda: run_predict(1, half=True), repeats)
    marginal = (one - half) * 2  # the seconds of the whole job without its fixed start-up cost
    two = timed(lambda: run_predict(2), repeats)
    pinned = timed(lambda: run_predict(1, threads=cores), repeats)
    rate = lambda s: samples / s  # noqa: E731
    print(
        f"\n{spec}: {samples} samples, batch {batch}, shards of {shard}, median of {repeats}, MKL_CBWR={os.environ.get('MKL_CBWR')}"
    )
    print(f"  hand loop              {rate(loop):>10,.0f} samples/s")
    print(f"  hand loop + save       {rate(loop_save):>10,.0f} samples/s")
    print(f"  hand loop + save, deterministic() {rate(loop_det):>10,.0f} samples/s")
    print(f"  hand script (model built from the spec, loop, save) {rate(program):>10,.0f} samples/s")
    print(
        f"  samebits predict       {rate(one):>10,.0f} samples/s   {loop / one:.2f}x loop, {loop_save / one:.2f}x loop+save, "
        f"{loop_det / one:.2f}x loop+save under deterministic(), {program / one:.2f}x the hand script"
    )
    print(
        f"  predict, past start-up {rate(marginal):>10,.0f} samples/s   {loop_det / marginal:.2f}x loop+save under "
        f"deterministic() (start-up {one - marginal:.2f} s: model, input digests, Predictor, thread plan)"
    )
    print(f"  predict --workers 2    {rate(two):>10,.0f} samples/s   {one / two:.2f}x workers 1")
    print(
        f"  predict --threads-per-worker {cores} {rate(pinned):>10,.0f} samples/s   {loop_save / pinned:.2f}x loop+save "
        f"(the default ran {plan['per_worker']} thread(s) per worker: {plan.get('why', '')})"
    )


def memory(samples: int, root: Path) -> None:
    loaded = load_model("demo:mlp")
    folder = root / "in-memory"
    folder.mkdir()
    write_inputs(folder, ModelInputs.from_example(loaded.example_inputs), samples, 100)
    readings: list[tuple[int, float]] = []
    predict(
        "demo:mlp",
        [str(folder)],
        root / "out-memory",
        shard_size=1000,
        cache_dir=root / "cache",
        progress=lambda done, total: readings.append((done, rss_mb())),
    )
    base = next(mb for done, mb in readings if done >= 1000)
    peak = max(mb for _, mb in readings)
    print(f"\nRSS over {samples:,} samples of demo:mlp (shards of 1000): after 1,000 {base:.1f} MB, peak {peak:.1f} MB")
    print(f"  growth {100 * (peak - base) / base:+.1f}% (target <= 5%)")


HAND_SCRIPT = """
import sys, time
started = time.perf_counter()
sys.path.insert(0, {bench!r})
from pathlib import Path
import torch
from predict_speed import hand_loop
from samebits.models import load_model
model = load_model({spec!r}).model.eval()
hand_loop(model, Path({folder!r}), 64, Path({out!r}))
print(time.perf_counter() - started)
"""


def long_job(samples: int, repeats: int, root: Path) -> None:
    """What a user runs: ``samebits predict`` from the command line (a fresh process, default
    shard size) against a hand script in a fresh process (import torch, build the model, loop,
    save), both timed from the interpreter's start to the end of the work."""
    import subprocess
    import sys

    spec = "demo:mlp"
    folder = root / "in-long"
    folder.mkdir()
    write_inputs(folder, ModelInputs.from_example(load_model(spec).example_inputs), samples, 20)

    def cli() -> None:
        shutil.rmtree(root / "out-long", ignore_errors=True)
        cmd = [sys.executable, "-m", "samebits", "predict", spec, str(folder), "-o", str(root / "out-long")]
        subprocess.run(
            cmd, check=True, capture_output=True, env={**os.environ, "SAMEBITS_CACHE_DIR": str(root / "cache")}
        )

    def script() -> None:
        shutil.rmtree(root / "loop-long", ignore_errors=True)
        (root / "loop-long").mkdir()
        code = HAND_SCRIPT.format(bench=str(HERE), spec=spec, folder=str(folder), out=str(root / "loop-long"))
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)

    cli()  # the calibration cached, as for any second run
    pairs = [(timed(cli, 1), timed(script, 1)) for _ in range(repeats)]
    ratios = sorted(b / a for a, b in pairs)
    print(
        f"\nlong job, {spec}: {samples:,} samples in 20 .npy files, the command line against a hand script (fresh processes)"
    )
    for a, b in pairs:
        print(f"  samebits predict {a:.2f} s, hand script {b:.2f} s: {b / a:.2f}x")
    print(f"  median {statistics.median(ratios):.2f}x the hand script (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples and repeats (a smoke run)")
    parser.add_argument(
        "--long", action="store_true", help="only the long job: 400k samples, the command line against a hand script"
    )
    args = parser.parse_args()
    if args.long:
        with tempfile.TemporaryDirectory(prefix="samebits-bench-") as tmp:
            long_job(40_000 if args.quick else 400_000, 1 if args.quick else 3, Path(tmp))
        return
    samples, repeats, big = (4_000, 1, 10_000) if args.quick else (40_000, 3, 100_000)
    with tempfile.TemporaryDirectory(prefix="samebits-bench-") as tmp:
        root = Path(tmp)
        speed("demo:mlp", samples, 64, repeats, root)
        speed("demo:cnn", samples // 4, 64, repeats, root)
        speed(f"{HERE / 'serve_models.py'}:medium_mlp", samples // 4, 64, repeats, root)
        speed(f"{HERE / 'serve_models.py'}:small_cnn", samples // 8, 64, repeats, root)
        speed(f"{HERE / 'predict_models.py'}:bert", samples // 8, 64, repeats, root)
        memory(big, root)


if __name__ == "__main__":
    main()
