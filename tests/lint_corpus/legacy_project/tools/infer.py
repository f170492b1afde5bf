"""Batch inference for the defect classifier (runs on the old CUDA 11.6 boxes)."""

import argparse
import json

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def build_model(num_classes):
    model = torchvision.models.resnet18(num_classes=num_classes)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("images")
    parser.add_argument("--weights", default="weights/defect_r18.pth")
    parser.add_argument("--num-classes", type=int, default=4)
    parser.add_argument("--out", default="predictions.json")
    args = parser.parse_args()

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    model = build_model(args.num_classes)
    state = torch.load(args.weights, map_location="cpu")
    model.load_state_dict(state)
    model.to(device)
    model.eval()

    tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])
    ds = datasets.ImageFolder(args.images, transform=tf)
    loader = DataLoader(ds, batch_size=32, num_workers=4)

    results = []
    with torch.no_grad():
        for images, _ in loader:
            logits = model(images.to(device))
            results.extend(logits.argmax(1).tolist())

    paths = [p for p, _ in ds.samples]
    with open(args.out, "w") as fh:
        json.dump(dict(zip(paths, results)), fh, indent=1)


if __name__ == "__main__":
    main()
