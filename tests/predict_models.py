"""Models for tests/test_predict.py: an MLP, and the same one slowed down (20 ms a forward), so a
run can be killed between shards."""

from __future__ import annotations

import time

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, slow: bool = False) -> None:
        super().__init__()
        self.slow = slow
        self.body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))

    def forward(self, x):
        if self.slow:
            time.sleep(0.02)
        return self.body(x)


def mlp():
    torch.manual_seed(0)
    return MLP(), torch.randn(8, 16)


def slow_mlp():
    torch.manual_seed(0)
    return MLP(slow=True), torch.randn(8, 16)


class SmallConv(nn.Module):
    """Convolutions, whose bits depend on the thread count on this CPU (measured by the check
    baseline): the thread plan must pin them."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 5, 1),  # this one: 1 and 2 threads give other bits at 16x16 (measured)
            nn.Flatten(),
        )

    def forward(self, images):
        return self.body(images)


def conv():
    torch.manual_seed(0)
    return SmallConv(), torch.randn(8, 3, 64, 64)


class OddOutput(MLP):
    """An output that is not all tensors: predict stores tensors only."""

    def forward(self, x):
        return {"y": self.body(x), "n": 3}


def odd_output():
    torch.manual_seed(0)
    return OddOutput(), torch.randn(8, 16)


class RaisesOnLarge(MLP):
    """Raises on a sample with a value over 50: a user's model that breaks on some data only
    (after its calibration on the example went through)."""

    def forward(self, x):
        if x.abs().max() > 50:
            raise ValueError("a value over 50: this model cannot take it")
        return self.body(x)


def raises_on_large():
    torch.manual_seed(0)
    return RaisesOnLarge(), torch.randn(8, 16)
