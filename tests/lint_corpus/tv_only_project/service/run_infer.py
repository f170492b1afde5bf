"""Nightly shelf-photo job: classify every image listed in a manifest, write results as JSON lines."""

import argparse
import json
import os

import torch
from PIL import Image
from torchvision import models, transforms

WEIGHTS = os.environ.get("WEIGHTS", "/models/resnet34_shelf.pth")

tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])


def build(num_classes=20):
    model = models.resnet34(num_classes=num_classes)
    model.load_state_dict(torch.load(WEIGHTS, map_location="cpu"))
    model.eval()
    return model


def chunks(items, n):
    for i in range(0, len(items), n):
        yield items[i : i + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest", help="one image path per line")
    ap.add_argument("--out", default="shelf_results.jsonl")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    with open(args.manifest) as fh:
        paths = [line.strip() for line in fh if line.strip()]

    model = build()
    with open(args.out, "w") as out, torch.no_grad():
        for group in chunks(paths, args.batch_size):
            batch = torch.stack([tf(Image.open(p).convert("RGB")) for p in group])
            probs = model(batch).softmax(1)
            for path, row in zip(group, probs.tolist()):
                out.write(json.dumps({"path": path, "probs": row}) + "\n")


if __name__ == "__main__":
    main()
