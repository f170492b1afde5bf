"""Put a model and its inputs on a device and dtype, the same way in the parent and in children."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from samebits.models.inputs import ModelInputs, parse_dtype


def _move(obj: Any, device: str, dtype: torch.dtype | None) -> Any:
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj.to(device)
    if isinstance(obj, list):
        return [_move(o, device, dtype) for o in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_move(o, device, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device, dtype) for k, v in obj.items()}
    return obj


def prepare(model: Any, inputs: ModelInputs, device: str = "cpu", dtype: str | None = None) -> tuple[Any, ModelInputs]:
    """Move ``model`` (when it is an ``nn.Module``) and the tensors in ``inputs`` to ``device``;
    with ``dtype``, cast the model and the floating-point inputs to it. The model is moved in
    place, as ``nn.Module.to`` does; its training mode is left as the user set it."""
    torch_dtype = parse_dtype(dtype) if dtype else None
    if isinstance(model, nn.Module):
        model.to(device=device, dtype=torch_dtype) if torch_dtype is not None else model.to(device)
    moved = ModelInputs(_move(inputs.args, device, torch_dtype), _move(inputs.kwargs, device, torch_dtype))
    return model, moved
