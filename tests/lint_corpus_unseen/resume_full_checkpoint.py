# shaped after pytorch/tutorials:beginner_source/basics/saveloadrun_tutorial.py (rewritten, not copied)
"""Predict FashionMNIST classes for a tensor file using a model saved whole with torch.save(model)."""
import argparse

import torch

CLASSES = ["T-shirt", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", help="a .pt file holding a uint8 tensor (N, 28, 28)")
    ap.add_argument("--model", default="model.pth")
    args = ap.parse_args()

    # the file holds the pickled nn.Module, not a state dict
    model = torch.load(args.model, weights_only=False, map_location="cpu")
    model.eval()

    images = torch.load(args.inputs)
    x = images.float().div(255).unsqueeze(1)
    with torch.no_grad():
        pred = model(x).argmax(1)
    for i, p in enumerate(pred.tolist()):
        print(i, CLASSES[p])


if __name__ == "__main__":
    main()
