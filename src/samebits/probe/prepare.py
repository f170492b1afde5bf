"""Put a model and its inputs on a device and dtype, the same way in the parent and in children."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from samebits.models.inputs import ModelInputs, parse_dtype


def move_tensors(obj: Any, device: str, dtype: torch.dtype | None = None) -> Any:
    """Every tensor in a nested structure moved to ``device`` (floating ones cast to ``dtype``)."""
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj.to(device)
    if isinstance(obj, list):
        return [move_tensors(o, device, dtype) for o in obj]
    if isinstance(obj, tuple):
        parts = [move_tensors(o, device, dtype) for o in obj]
        return type(obj)(*parts) if hasattr(obj, "_fields") else tuple(parts)
    if isinstance(obj, dict):
        return {k: move_tensors(v, device, dtype) for k, v in obj.items()}
    return obj


def prepare(model: Any, inputs: ModelInputs, device: str = "cpu", dtype: str | None = None) -> tuple[Any, ModelInputs]:
    """Move ``model`` (when it is an ``nn.Module``) and the tensors in ``inputs`` to ``device``;
    with ``dtype``, cast the model and the floating-point inputs to it. The model is moved in
    place, as ``nn.Module.to`` does; its training mode is left as the user set it."""
    torch_dtype = parse_dtype(dtype) if dtype else None
    if isinstance(model, nn.Module):
        model.to(device=device, dtype=torch_dtype) if torch_dtype is not None else model.to(device)
    moved = ModelInputs(move_tensors(inputs.args, device, torch_dtype), move_tensors(inputs.kwargs, device, torch_dtype))
    return model, moved
