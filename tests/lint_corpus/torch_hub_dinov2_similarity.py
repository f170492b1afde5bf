"""Compare a query image against a handful of gallery images with DINOv2 features."""

import argparse
import glob

import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms

TRANSFORM = transforms.Compose(
    [
        transforms.Resize(256, interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    ]
)


def load_images(paths):
    return torch.stack([TRANSFORM(Image.open(p).convert("RGB")) for p in paths])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("query")
    parser.add_argument("gallery", help="glob, e.g. 'shots/*.jpg'")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.hub.load("facebookresearch/dinov2", "dinov2_vits14")
    model.to(device)

    paths = sorted(glob.glob(args.gallery))
    batch = load_images([args.query, *paths]).to(device)

    with torch.no_grad():
        feats = model(batch)
    feats = F.normalize(feats, dim=-1)
    sims = feats[1:] @ feats[0]

    order = sims.argsort(descending=True)[: args.top].tolist()
    for rank, i in enumerate(order, 1):
        print(f"{rank}. {paths[i]}  cos={sims[i].item():.3f}")


if __name__ == "__main__":
    main()
