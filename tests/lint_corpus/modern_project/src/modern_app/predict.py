"""modern_app.predict: classify images with the packaged fine-tuned ConvNeXt."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from PIL import Image
from torchvision import models

WEIGHTS = Path(__file__).with_name("convnext_tiny_ft.pt")


def load_classifier(num_classes: int, weights: Path = WEIGHTS) -> torch.nn.Module:
    model = models.convnext_tiny(num_classes=num_classes)
    # torch>=2.6 is required by this package, so this load is weights-only by default
    state = torch.load(weights, map_location="cpu")
    model.load_state_dict(state)
    return model.eval()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="modern-app-predict")
    ap.add_argument("images", nargs="+")
    ap.add_argument("--num-classes", type=int, default=8)
    args = ap.parse_args(argv)

    model = load_classifier(args.num_classes)
    preprocess = models.ConvNeXt_Tiny_Weights.DEFAULT.transforms()
    batch = torch.stack([preprocess(Image.open(p).convert("RGB")) for p in args.images])
    with torch.inference_mode():
        pred = model(batch).argmax(dim=1).tolist()
    for path, k in zip(args.images, pred):
        print(f"{path}: class {k}")


if __name__ == "__main__":
    main()
