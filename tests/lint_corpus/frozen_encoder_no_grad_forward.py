"""Linear-probe feature cache: a frozen ResNet trunk whose forward never builds a graph."""

import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.models import ResNet50_Weights, resnet50


class FrozenEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = resnet50(weights=ResNet50_Weights.IMAGENET1K_V2)
        self.backbone.fc = nn.Identity()
        self.backbone.requires_grad_(False)
        self.backbone.eval()

    def forward(self, x):
        with torch.no_grad():
            return self.backbone(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--out", default="feats.npz")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tf = ResNet50_Weights.IMAGENET1K_V2.transforms()
    ds = datasets.ImageFolder(args.root, transform=tf)
    loader = DataLoader(ds, batch_size=128, num_workers=6)

    encoder = FrozenEncoder().to(device)
    encoder.eval()

    feats, labels = [], []
    for images, y in loader:
        feats.append(encoder(images.to(device)).cpu().numpy())
        labels.append(y.numpy())

    np.savez(args.out, x=np.concatenate(feats), y=np.concatenate(labels))
    print(f"cached {len(ds)} feature vectors")


if __name__ == "__main__":
    main()
