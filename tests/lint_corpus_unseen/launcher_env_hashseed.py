# shaped after drdholu/URN:utils/seed_util.py (rewritten, not copied)
"""Launch one inference worker per GPU over shards of a manifest, with a fixed environment."""
import argparse
import os
import subprocess
import sys

import torch

os.environ.setdefault("PYTHONHASHSEED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def worker_env(rank, world):
    env = dict(os.environ)
    env.update({
        "CUDA_VISIBLE_DEVICES": str(rank),
        "PYTHONHASHSEED": "0",  # read by the child at start-up: this one works
        "SHARD": f"{rank}/{world}",
    })
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--script", default="infer_shard.py")
    args = ap.parse_args()

    world = max(torch.cuda.device_count(), 1)
    procs = [
        subprocess.Popen([sys.executable, args.script, args.manifest], env=worker_env(r, world))
        for r in range(world)
    ]
    codes = [p.wait() for p in procs]
    print("exit codes:", codes)
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
