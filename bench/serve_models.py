"""Models for bench/serve_load.py: each factory seeds torch and returns ``(model, example batch of 8)``,
and each forward takes one tensor named ``x`` (the input's name in the inference protocol)."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, *widths: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths, widths[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 16x16
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def small_mlp():
    torch.manual_seed(0)
    return MLP(64, 128, 10), torch.randn(8, 64)


def medium_mlp():
    torch.manual_seed(0)
    return MLP(512, 2048, 2048, 10), torch.randn(8, 512)


def small_cnn():
    torch.manual_seed(0)
    return SmallCNN(), torch.randn(8, 3, 32, 32)
