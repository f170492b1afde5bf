"""Offline scoring of precomputed crops with a TorchScript model on GPU, optionally in fp16."""

import argparse

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", help="TorchScript file from torch.jit.save")
    ap.add_argument("crops", help=".npy array, N x 3 x 128 x 128, float32")
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--out", default="scores.npy")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.jit.load(args.model, map_location="cpu")
    model.eval()
    model.to(device)
    if args.fp16:
        model.half()

    data = torch.from_numpy(np.load(args.crops))
    loader = DataLoader(TensorDataset(data), batch_size=256, pin_memory=True)

    scores = []
    with torch.inference_mode():
        for (x,) in loader:
            x = x.to(device, non_blocking=True)
            if args.fp16:
                x = x.half()
            out = model(x)
            scores.append(out.float().cpu().numpy())
    if device.type == "cuda":
        torch.cuda.synchronize()

    np.save(args.out, np.concatenate(scores))
    print(f"scored {len(data)} crops")


if __name__ == "__main__":
    main()
