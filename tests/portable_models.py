"""A model with every op class the portable level must pin (tests/test_portable.py and the
golden in tests/data recorded under x86-64-v3)."""

from __future__ import annotations

import torch
from torch import nn


class Mixed(nn.Module):
    """Embedding, attention (its softmax), layer and group norm, a convolution (oneDNN), Linear
    (MKL), GELU and a softmax: token ids in, class probabilities per token out."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = nn.LayerNorm(32)
        self.conv = nn.Conv1d(32, 32, 3, padding=1)
        self.group = nn.GroupNorm(4, 32)
        self.ff = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10))

    def forward(self, ids):
        h = self.embed(ids)
        h = self.norm(h + self.attn(h, h, h, need_weights=False)[0])
        h = h + self.group(self.conv(h.transpose(1, 2))).transpose(1, 2)
        return self.ff(h).softmax(-1)


def mixed():
    torch.manual_seed(0)
    return Mixed(), torch.randint(0, 100, (4, 16), generator=torch.Generator().manual_seed(1))
