"""Run a model that was exported with torch.export and saved as a .pt2 archive."""

import argparse
import time

import torch


def load_exported(path):
    ep = torch.export.load(path)
    return ep.module()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive", help="model.pt2 written by torch.export.save")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--inputs", default=None, help="optional .pt tensor of inputs")
    args = ap.parse_args()

    model = load_exported(args.archive)
    if args.inputs:
        x = torch.load(args.inputs)
    else:
        x = torch.rand(args.batch, 3, args.size, args.size)

    with torch.no_grad():
        t0 = time.perf_counter()
        y = model(x)
        dt = time.perf_counter() - t0

    print(f"output {tuple(y.shape)} in {dt * 1000:.1f} ms")
    print("top classes:", y.argmax(dim=-1).tolist())


if __name__ == "__main__":
    main()
