"""Latency benchmark for the edge model: fixed random input, N timed iterations."""

import argparse
import statistics
import time

import torch
from torchvision import models


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="mbv3_edge.pth")
    ap.add_argument("--num-classes", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def main():
    args = parse_args()
    model = models.mobilenet_v3_large(weights=None, num_classes=args.num_classes)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()

    torch.manual_seed(args.seed)
    x = torch.randn(args.batch, 3, 224, 224)

    timings = []
    with torch.no_grad():
        for _ in range(5):
            model(x)
        for _ in range(args.iters):
            t0 = time.perf_counter()
            out = model(x)
            timings.append(time.perf_counter() - t0)

    print(f"output checksum: {out.sum().item():.6f}")
    print(
        f"median {1000 * statistics.median(timings):.2f} ms, p90 {1000 * sorted(timings)[int(0.9 * len(timings))]:.2f} ms"
    )


if __name__ == "__main__":
    main()
