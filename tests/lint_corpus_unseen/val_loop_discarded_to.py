# shaped after alantanlc/ce7454-grp17:validate.sh (rewritten, not copied)
"""Validate a 5-class fashion-attribute classifier and print per-class accuracy."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from attr_data import AttributeDataset, val_transform
from attr_models import build_classifier


def validate(model, loader, device, num_classes=5):
    criterion = nn.CrossEntropyLoss()
    criterion.to(device)
    correct = torch.zeros(num_classes)
    total = torch.zeros(num_classes)
    loss_sum = 0.0
    with torch.no_grad():
        for images, labels in loader:
            images.to(device)
            labels = labels.to(device)
            logits = model(images)
            loss_sum += criterion(logits, labels).item() * labels.size(0)
            pred = logits.argmax(1)
            for c in range(num_classes):
                sel = labels == c
                total[c] += sel.sum().item()
                correct[c] += (pred[sel] == c).sum().item()
    return loss_sum / total.sum().item(), (correct / total.clamp(min=1)).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data", default="data/val.csv")
    ap.add_argument("--bs", type=int, default=128)
    args = ap.parse_args()
    device = torch.device("cuda")

    model = build_classifier("resnet18", num_classes=5)
    model.load_state_dict(torch.load(args.checkpoint, map_location="cpu", weights_only=True)["state_dict"])
    model.to(device)
    model.eval()

    loader = DataLoader(AttributeDataset(args.data, val_transform()), batch_size=args.bs, num_workers=4)
    loss, per_class = validate(model, loader, device)
    print(f"val loss {loss:.4f}")
    for c, acc in enumerate(per_class):
        print(f"class {c}: {acc:.3f}")


if __name__ == "__main__":
    main()
