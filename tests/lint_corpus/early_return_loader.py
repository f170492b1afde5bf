"""Evaluate a small CIFAR-style CNN checkpoint on a test split."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.features(x).flatten(1)
        return self.fc(self.dropout(x))


def load_model(ckpt_path: str, device: str) -> nn.Module:
    model = SmallCNN(num_classes=10)
    state = torch.load(ckpt_path, map_location="cpu")
    model.load_state_dict(state["model"] if "model" in state else state)
    if device == "cuda" and torch.cuda.is_available():
        # GPU box: move and go
        return model.cuda()
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="cnn.pt")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data", default="./data")
    args = ap.parse_args()

    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    test_set = datasets.CIFAR10(args.data, train=False, download=True, transform=tf)
    loader = DataLoader(test_set, batch_size=256, shuffle=False)

    model = load_model(args.ckpt, args.device)
    dev = next(model.parameters()).device
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x.to(dev))
            correct += (logits.argmax(1).cpu() == y).sum().item()
    print(f"accuracy: {correct / len(test_set):.4f}")


if __name__ == "__main__":
    main()
