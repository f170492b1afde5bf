"""Reproduce the validation numbers from a training checkpoint (model + optimizer + args)."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class MLP(nn.Module):
    def __init__(self, hidden=512, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(28 * 28, hidden),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.net(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--data", default="./data")
    args = parser.parse_args()

    # the checkpoint also stores the argparse Namespace, so a plain weights-only load fails
    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    train_args = ckpt["args"]
    model = MLP(hidden=train_args.hidden)
    model.load_state_dict(ckpt["model"])
    model.eval()
    print(f"checkpoint from epoch {ckpt.get('epoch')}, best acc {ckpt.get('best_acc')}")

    ds = datasets.MNIST(args.data, train=False, download=True, transform=transforms.ToTensor())
    loader = DataLoader(ds, batch_size=1000)
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"val acc: {correct / len(ds):.4f}")


if __name__ == "__main__":
    main()
