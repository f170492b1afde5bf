# shaped after facebookresearch/TorchRay:examples/gradient_manual.py (rewritten, not copied)
"""Vanilla-gradient saliency maps for a folder of images (the backward pass is the point here)."""
import argparse
import os

import matplotlib.pyplot as plt
import torch
from PIL import Image
from torchvision.models import VGG16_Weights, vgg16


def saliency(model, x):
    # one backward for the whole batch: each image's score depends only on its own pixels
    x = x.clone().requires_grad_(True)
    scores = model(x)
    cats = scores.argmax(1)
    model.zero_grad()
    scores.gather(1, cats[:, None]).sum().backward()
    return x.grad.abs().amax(1), cats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--out", default="saliency")
    args = ap.parse_args()

    weights = VGG16_Weights.IMAGENET1K_V1
    model = vgg16(weights=weights).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    preprocess = weights.transforms()
    names = weights.meta["categories"]

    fnames = sorted(os.listdir(args.folder))
    images = [Image.open(os.path.join(args.folder, f)).convert("RGB") for f in fnames]
    sal, cats = saliency(model, torch.stack([preprocess(im) for im in images]))

    os.makedirs(args.out, exist_ok=True)
    for fname, img, s, c in zip(fnames, images, sal, cats.tolist()):
        fig, axes = plt.subplots(1, 2, figsize=(8, 4))
        axes[0].imshow(img)
        axes[0].set_title(names[c])
        axes[1].imshow(s.numpy(), cmap="hot")
        for ax in axes:
            ax.axis("off")
        fig.savefig(os.path.join(args.out, fname.rsplit(".", 1)[0] + ".png"))
        plt.close(fig)


if __name__ == "__main__":
    main()
