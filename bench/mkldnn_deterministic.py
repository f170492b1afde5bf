"""Does ``torch.backends.mkldnn.deterministic`` change an inference forward's bits, and what does
it cost? Each model in fresh processes (two per setting), with the switch on and off, at 1 and 2
threads: the output digest and the median forward time. Issue #28 decides the Predictor's
profile from this table (docs/predict.md).

Run: python bench/mkldnn_deterministic.py [--models resnet18,demo:cnn,small_cnn,medium_mlp,bert,vit,t5,clip,bart,gpt2,detector]
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
MODELS = "resnet18,demo:cnn,small_cnn,medium_mlp,bert,vit,t5,clip,bart,gpt2,detector"


def build(name: str):
    import torch

    import samebits
    from samebits.models import ModelInputs

    sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
    if name.startswith("demo:"):
        loaded = samebits.load_model(name)
        return loaded.model.eval(), ModelInputs.from_example(loaded.example_inputs)
    if name == "resnet18":
        from resnet import resnet18

        model, _ = resnet18()
        return model.eval(), ModelInputs((torch.randn(8, 3, 64, 64, generator=torch.Generator().manual_seed(0)),), {})
    if name in ("small_cnn", "medium_mlp"):
        import serve_models

        model, x = getattr(serve_models, name)()
        return model.eval(), ModelInputs((x,), {})
    import real_models

    model, example = getattr(real_models, name)()
    return model.eval(), ModelInputs.from_example(example)


def child(name: str, flag: bool) -> None:
    import torch

    import samebits

    torch.backends.mkldnn.deterministic = flag
    model, inputs = build(name)
    with torch.inference_mode():
        out = inputs.call(model)
        times = []
        start = time.perf_counter()
        while len(times) < 5 or time.perf_counter() - start < 1.0:
            t = time.perf_counter()
            inputs.call(model)
            times.append(time.perf_counter() - t)
    print(json.dumps({"digest": samebits.digest(out)[:16], "ms": statistics.median(times) * 1e3}))


def run(name: str, flag: bool, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--flag", str(int(flag))],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--child")
    parser.add_argument("--flag", type=int)
    args = parser.parse_args()
    if args.child:
        return child(args.child, bool(args.flag))
    print(f"{os.cpu_count()} cores, load before {os.getloadavg()[0]:.2f}")
    print("| model | threads | bits on = off (2 processes each) | on / off forward time |")
    print("|---|---|---|---|")
    for name in args.models.split(","):
        for threads in (1, 2):
            runs: dict[bool, list[dict]] = {True: [], False: []}
            for _ in range(2):  # on, off, on, off: the time ratio is not one moment against another
                for flag in (True, False):
                    runs[flag].append(run(name, flag, threads))
            digests = {r["digest"] for rs in runs.values() for r in rs}
            on = statistics.median(r["ms"] for r in runs[True])
            off = statistics.median(r["ms"] for r in runs[False])
            same = "yes" if len(digests) == 1 else f"NO ({len(digests)} digests)"
            print(f"| {name} | {threads} | {same} | {on / off:.2f}x ({on:.2f} / {off:.2f} ms) |", flush=True)
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
