"""How long a Predictor's calibration takes and how much memory it grows, with the default time
and memory budgets against none (issue #31: a detector calibrated for 770 s and 12.9 GB).

Run: python bench/calibration_budget.py [--sizes 32,224] [--budget 60]
Each configuration runs in a fresh process (a peak RSS only grows in one). Models: the suite's
torchvision-style two-stage detector (tests/real_models.py) on images of each size, and the
ResNet-18-sized CNN of bench/resnet.py. Prints, per model: seconds, peak RSS growth, the sizes
tried, the verified sizes, and why the calibration stopped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = r"""
import json, resource, sys, tempfile, time
sys.path[:0] = [{tests!r}, {bench!r}]
import torch, samebits
import real_models
kind, size, budget, memory = {kind!r}, {size}, {budget}, {memory}
if kind == "detector":
    model = real_models._detector().eval()
    example = ([*real_models._images(2, size)],)
else:
    import resnet
    model, example = resnet.resnet18()[0], torch.randn(2, 3, size, size)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.monotonic()
p = samebits.Predictor(model, example_inputs=example, cache_dir=tempfile.mkdtemp(), deterministic=False,
                       calibration_budget=budget, memory_budget_mb=memory)
m = p.invariance.measured
print(json.dumps({{"seconds": round(time.monotonic() - t, 1),
                  "peak_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024),
                  "tried": m.get("tried"), "verified": p.invariance.sizes, "stopped": m.get("stopped"),
                  "scheme": p.invariance.scheme}}))
"""


def run(kind: str, size: int, budget: float, memory: float) -> dict:
    code = CHILD.format(
        tests=str(HERE.parent / "tests"), bench=str(HERE), kind=kind, size=size, budget=budget, memory=memory
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="32,224", help="image sizes, comma-separated")
    parser.add_argument("--budget", type=float, default=60.0, help="calibration_budget (seconds)")
    parser.add_argument("--memory", type=float, default=0.0, help="memory_budget_mb (0: the default)")
    parser.add_argument("--models", default="detector,resnet")
    args = parser.parse_args()
    print(f"{'model':<10} {'px':>4} {'s':>6} {'peak MB':>8}  tried / verified / stopped")
    for kind in args.models.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            r = run(kind, size, args.budget, args.memory or None)
            if "error" in r:
                print(f"{kind:<10} {size:>4} error: {r['error']}")
                continue
            print(
                f"{kind:<10} {size:>4} {r['seconds']:>6} {r['peak_mb']:>8}  {r['tried']} / {r['verified']} / {r['stopped'] or 'every size'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
