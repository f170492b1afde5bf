"""Generate augmentation previews for a dataset card, with every RNG pinned."""

import argparse
import os
import random

import numpy as np
import torch
from PIL import Image
from torchvision import models, transforms


def seed_everything(seed: int) -> None:
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("images", nargs="+")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n", type=int, default=4)
    args = ap.parse_args()

    seed_everything(args.seed)
    weights = models.ResNet18_Weights.DEFAULT
    model = models.resnet18(weights=weights).eval()
    categories = weights.meta["categories"]
    aug = transforms.Compose(
        [
            transforms.RandomResizedCrop(224, scale=(0.5, 1.0)),
            transforms.ColorJitter(0.3, 0.3, 0.3),
            transforms.ToTensor(),
        ]
    )
    norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])

    for path in args.images:
        img = Image.open(path).convert("RGB")
        views = torch.stack([aug(img) for _ in range(args.n)])
        with torch.no_grad():
            top = model(norm(views)).argmax(1).tolist()
        print(path, [categories[i] for i in top])


if __name__ == "__main__":
    main()
