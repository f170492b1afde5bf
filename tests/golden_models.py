"""Factories for the golden tests (loaded by spec, so that the spec is stored in goldens)."""

import torch
from torch import nn


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x, scale=None):
        y = self.fc2(torch.relu(self.fc1(x)))
        out = {"logits": y, "count": int(y.shape[0]), "name": "two-layer"}
        return out if scale is None else {**out, "scaled": y * scale["factor"]}


def _model():
    torch.manual_seed(0)
    return TwoLayer().eval()


def make():
    return _model(), (torch.randn(4, 6, generator=torch.Generator().manual_seed(3)),)


def make_kwargs():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    return _model(), {"x": x, "scale": {"factor": torch.tensor(2.0)}}


def changed_fc2():
    model = _model()
    with torch.no_grad():
        model.fc2.weight[0, 0] += 1e-3
    return model, None
