"""Which of the deterministic profile's CPU switches change an inference forward's bits, and what
each costs: every model in fresh processes (two per setting, interleaved), at 1 and 2 threads,
with none of them, each alone, and all (what ``samebits.deterministic()`` sets): the output digest
and the median forward time. Issue #28 decides the Predictor's profile from this table
(docs/predict.md).

Run: python bench/profile_switches.py [--models resnet18,demo:cnn,small_cnn,medium_mlp,bert,vit,t5,clip,bart,gpt2,detector]
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


SETTINGS = {
    "none": (),
    "mkldnn.deterministic": ("mkldnn",),
    "deterministic algorithms": ("algorithms",),
    "+ fill uninitialized memory": ("algorithms", "fill"),
    "the whole profile": ("mkldnn", "algorithms", "fill"),
}


def child(name: str, setting: str) -> None:
    import torch

    import samebits

    switches = SETTINGS[setting]
    torch.backends.mkldnn.deterministic = "mkldnn" in switches
    torch.use_deterministic_algorithms("algorithms" in switches)
    torch.utils.deterministic.fill_uninitialized_memory = "fill" in switches
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


def run(name: str, setting: str, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--setting", setting],
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
    parser.add_argument("--setting")
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.setting)
    print(f"{os.cpu_count()} cores, load before {os.getloadavg()[0]:.2f}")
    others = [s for s in SETTINGS if s != "none"]
    print("| model | threads | none, ms | " + " | ".join(f"{s}: bits, time" for s in others) + " |")
    print("|---|---|---|" + "---|" * len(others))
    for name in args.models.split(","):
        for threads in (1, 2):
            runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
            for _ in range(2):  # every setting, twice, interleaved: no ratio is one moment against another
                for setting in SETTINGS:
                    runs[setting].append(run(name, setting, threads))
            base = runs["none"]
            ms = {s: statistics.median(r["ms"] for r in rs) for s, rs in runs.items()}
            cells = []
            for s in others:
                same = {r["digest"] for r in runs[s] + base}
                cells.append(f"{'same' if len(same) == 1 else 'OTHER BITS'}, {ms[s] / ms['none']:.2f}x")
            print(f"| {name} | {threads} | {ms['none']:.2f} | " + " | ".join(cells) + " |", flush=True)
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
