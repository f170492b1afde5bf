"""Per-image evaluation on an ImageFolder validation split; writes a CSV of predictions."""

import argparse
import csv

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def get_loader(root):
    tf = transforms.Compose(
        [
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    ds = datasets.ImageFolder(root, transform=tf)
    # batch_size=1 so every row in the CSV lines up with ds.samples
    return ds, DataLoader(ds, batch_size=1, shuffle=False, num_workers=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("val_dir")
    parser.add_argument("--weights", default="efficientnet_b0_finetuned.pth")
    parser.add_argument("--out", default="preds.csv")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ds, loader = get_loader(args.val_dir)

    model = models.efficientnet_b0(num_classes=len(ds.classes))
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.to(device)
    model.eval()

    preds = []
    with torch.no_grad():
        for images, labels in loader:
            out = model(images.to(device))
            preds.append((out.argmax(1).item(), labels.item()))

    with open(args.out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["path", "pred", "label"])
        for (path, _), (pred, label) in zip(ds.samples, preds):
            writer.writerow([path, ds.classes[pred], ds.classes[label]])
    acc = sum(p == t for p, t in preds) / len(preds)
    print(f"top-1: {acc:.4f}")


if __name__ == "__main__":
    main()
