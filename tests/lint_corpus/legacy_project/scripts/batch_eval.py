"""Evaluate every checkpoint in a run directory on the held-out set and print a table."""

import argparse
import glob
import os

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def evaluate(ckpt_path, loader, device, num_classes):
    model = torchvision.models.resnet18(num_classes=num_classes)
    # torch 1.13 already has weights_only; our checkpoints are plain state dicts
    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.to(device)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            preds = model(images.to(device)).argmax(1).cpu()
            correct += (preds == labels).sum().item()
            total += labels.numel()
    return correct / max(total, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--holdout", default="data/holdout")
    ap.add_argument("--num-classes", type=int, default=4)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])
    loader = DataLoader(datasets.ImageFolder(args.holdout, transform=tf), batch_size=64)

    rows = []
    for ckpt in sorted(glob.glob(os.path.join(args.run_dir, "*.pth"))):
        rows.append((os.path.basename(ckpt), evaluate(ckpt, loader, device, args.num_classes)))
    for name, acc in sorted(rows, key=lambda r: -r[1]):
        print(f"{name:40s} {acc:.4f}")


if __name__ == "__main__":
    main()
