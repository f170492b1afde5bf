"""Put a model and its inputs on a device and dtype, the same way in the parent and in children."""

from __future__ import annotations

from typing import Any

from torch import nn

from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs, parse_dtype
from samebits.tensors import tree


def check_device(device: str) -> None:
    """A one-line error for a device this torch does not know or cannot use here."""
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise UserError(f"unknown device '{device}'; use cpu, cuda, cuda:N or mps") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device '{device}' was asked for, but CUDA is not available here (torch build or driver)")
    if kind == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise UserError(f"device '{device}' was asked for, but MPS is not available here")
    if kind not in ("cpu", "cuda", "mps"):
        raise UserError(f"device '{device}' is not supported by samebits; use cpu, cuda, cuda:N or mps")


def device_kind(device: str) -> str:
    """``cpu``, ``cuda`` or ``mps``: what a golden records, and verify must run on."""
    import torch

    return torch.device(device).type


def prepare(
    model: Model | None, inputs: ModelInputs, device: str = "cpu", dtype: str | None = None
) -> tuple[Any, ModelInputs]:
    """Move ``model`` (when it is an ``nn.Module``) and the tensors in ``inputs`` to ``device``;
    with ``dtype``, cast the model and the floating-point inputs to it. The model is moved in
    place, as ``nn.Module.to`` does; its training mode is left as the user set it."""
    check_device(device)
    torch_dtype = parse_dtype(dtype) if dtype else None
    if isinstance(model, nn.Module):
        meta = next((n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta), None)
        if meta is not None:
            raise UserError(
                f"the model's tensors are on the meta device (shapes without data, e.g. '{meta}'): load its "
                "weights first (model.to_empty(device=...) then load_state_dict, or from_pretrained)"
            )
        model.to(device=device, dtype=torch_dtype) if torch_dtype is not None else model.to(device)
    moved = ModelInputs(tree.move(inputs.args, device, torch_dtype), tree.move(inputs.kwargs, device, torch_dtype))
    return model, moved
