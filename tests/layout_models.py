"""One small MLP built in memory, and the same weights loaded back from a safetensors file the way
loaders keep them (``load_state_dict(assign=True)``: tensors where the file's bytes sit)."""

import tempfile
from pathlib import Path

import torch
from torch import nn


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 64))


def _weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return _mlp().state_dict()


def example() -> torch.Tensor:
    return torch.randn(1, 256, generator=torch.Generator().manual_seed(1))  # one row: GEMV paths


def in_memory():
    model = _mlp().eval()
    model.load_state_dict(_weights())  # copied into the model's own, aligned storage
    return model, example()


def from_safetensors():
    from safetensors.torch import load_file, save_file

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.safetensors"
        save_file(_weights(), str(path))
        weights = load_file(str(path))
    model = _mlp().eval()
    model.load_state_dict(weights, assign=True)  # kept where load_file put them
    return model, example()


class StrideSensitive(nn.Linear):
    """A Linear whose kernel takes another path (float64, rounded) for a transposed weight, as some
    GEMMs give other bits for another layout."""

    def forward(self, x):
        if self.weight.is_contiguous():
            return super().forward(x)
        return nn.functional.linear(x.double(), self.weight.double(), self.bias.double()).float()


def stride_sensitive(transposed: bool = False):
    torch.manual_seed(0)
    model = StrideSensitive(64, 32).eval()
    if transposed:  # as given: a view of a transposed checkpoint
        model.weight = nn.Parameter(model.weight.detach().t().contiguous().t())
    return model, torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
