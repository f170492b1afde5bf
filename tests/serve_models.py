"""Models for tests/test_serve.py: a plain MLP, and one whose forward is slow or raises on a
marker row (first feature 7.0: sleeps 0.5 s; 13.0: raises), for the overload and fault paths."""

from __future__ import annotations

import time

import torch
from torch import nn


class Moody(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        if bool((x[:, 0] == 13.0).any()):
            raise RuntimeError("row marked to fail")
        if bool((x[:, 0] == 7.0).any()):
            time.sleep(0.5)
        return self.fc(x)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.body(x)


def mlp():
    torch.manual_seed(0)
    return MLP(), torch.randn(8, 32)


def moody():
    torch.manual_seed(0)
    return Moody(), torch.randn(4, 8)


def mlp_retrained():
    """The same architecture with other weights: a server of it must not reproduce mlp's golden."""
    torch.manual_seed(1)
    model = MLP()
    torch.manual_seed(0)
    return model, torch.randn(8, 32)


class Stuck(Moody):
    """Moody whose marked row (first feature 7.0) never returns: only a process can be ended."""

    def forward(self, x):
        if bool((x[:, 0] == 7.0).any()):
            while True:
                time.sleep(0.05)
        return super().forward(x)


def stuck():
    torch.manual_seed(0)
    return Stuck(), torch.randn(4, 8)


class Embedder(nn.Module):
    """Token ids through a 10-row embedding: an id outside 0..9 makes the forward raise."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, ids):
        return self.head(self.table(ids).mean(dim=1))


def embedder():
    torch.manual_seed(0)
    return Embedder(), torch.randint(0, 10, (4, 3), generator=torch.Generator().manual_seed(0))


class HangsWhenRetried(nn.Module):
    """A row of 9.0 takes 0.5 s (requests queue behind it); a batch holding a 13.0 row raises, so
    its requests are retried alone; a 7.0 row without a 13.0 beside it never returns."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        first = x[:, 0]
        if bool((first == 9.0).any()):
            time.sleep(0.5)
        if bool((first == 13.0).any()):
            raise RuntimeError("row marked to fail")
        if bool((first == 7.0).any()):
            while True:
                time.sleep(0.05)
        return self.fc(x)


def hangs_when_retried():
    torch.manual_seed(0)
    return HangsWhenRetried(), torch.randn(4, 8)
