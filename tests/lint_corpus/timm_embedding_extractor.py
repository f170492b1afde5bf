"""Dump ConvNeXt embeddings for every image in a folder to a .npy file (for a kNN index)."""

import argparse

import numpy as np
import timm
import torch
from timm.data import create_transform, resolve_data_config
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder


def build_loader(root, transform, batch_size):
    ds = ImageFolder(root, transform=transform)
    return ds, DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=8, pin_memory=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--arch", default="convnext_tiny.fb_in22k")
    ap.add_argument("--out", default="embeddings.npy")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = timm.create_model(args.arch, pretrained=True, num_classes=0)
    model.eval()
    model.to(device)

    config = resolve_data_config({}, model=model)
    transform = create_transform(**config)
    ds, loader = build_loader(args.root, transform, args.batch_size)

    all_feats = []
    for step, (images, _) in enumerate(loader):
        feats = model(images.to(device, non_blocking=True))
        feats = torch.nn.functional.normalize(feats, dim=1)
        all_feats.append(feats.detach().cpu().numpy())
        if step % 50 == 0:
            print(f"{step * args.batch_size}/{len(ds)}")

    np.save(args.out, np.concatenate(all_feats))
    print(f"saved {len(ds)} embeddings to {args.out}")


if __name__ == "__main__":
    main()
