"""Reproducible evaluation run for the ablation table (seeds + cudnn flags set up front)."""

import argparse
import random

import numpy as np
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def set_determinism(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/val")
    ap.add_argument("--weights", default="r50_ablation_c.pth")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    set_determinism(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    tf = transforms.Compose(
        [
            transforms.Resize(232),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    ds = datasets.ImageFolder(args.data, transform=tf)
    loader = DataLoader(ds, batch_size=128, shuffle=False, num_workers=8, pin_memory=True)

    model = models.resnet50(num_classes=len(ds.classes))
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.to(device).eval()

    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            preds = model(images.to(device)).argmax(1).cpu()
            correct += (preds == labels).sum().item()
    print(f"acc@1 {100.0 * correct / len(ds):.2f}")


if __name__ == "__main__":
    main()
