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
