"""The layouts a forward is re-run under: the model's parameters and its inputs re-laid in memory
as loaders lay them (fresh aligned storage, an offset from an aligned address, transposed
strides), the values unchanged."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Literal

import torch

from samebits.models.inputs import Model, ModelInputs
from samebits.tensors.layout import OFFSET_BYTES, Relay, aligned_copy, is_aligned, offset_copy, relaid, strided_copy
from samebits.tensors.tree import map_tensors


@dataclasses.dataclass(frozen=True)
class Layout:
    """One way to re-lay the model's parameters and buffers (``on="parameters"``) or its inputs."""

    name: str
    what: str
    relay: Relay
    on: Literal["parameters", "inputs"]

    @contextlib.contextmanager
    def applied(self, model: Model, inputs: ModelInputs) -> Iterator[ModelInputs]:
        """Inside the block the model's tensors are re-laid (``on="parameters"``); yields the inputs
        to run on (re-laid copies for ``on="inputs"``)."""
        if self.on == "inputs":
            yield ModelInputs(map_tensors(self.relay, inputs.args), map_tensors(self.relay, inputs.kwargs))
            return
        if not isinstance(model, torch.nn.Module):  # callers skip a model without parameters
            raise TypeError(f"parameters re-laid only on an nn.Module, not a {type(model).__name__}")
        with relaid(model, self.relay):
            yield inputs


@dataclasses.dataclass
class LayoutTried:
    """One layout a forward ran under and its verdict against the model as given (or a golden):
    identical, close, diverged, skipped or error (``note``: the difference, or why)."""

    name: str
    what: str
    verdict: str
    note: str = ""
    counts: bool = True  # False: a layout the model as given is never in, measured as sensitivity only


LAYOUTS = (
    Layout("parameters aligned", "parameters and buffers in fresh aligned storage", aligned_copy, "parameters"),
    Layout(
        "parameters offset",
        f"parameters and buffers {OFFSET_BYTES} bytes past an aligned address, as a file maps them",
        offset_copy,
        "parameters",
    ),
    Layout(
        "parameters strided",
        "parameters with their last two dims laid out transposed, as a view of a transposed checkpoint is",
        strided_copy,
        "parameters",
    ),
    Layout("inputs offset", f"inputs {OFFSET_BYTES} bytes past an aligned address", offset_copy, "inputs"),
    Layout("inputs strided", "inputs with their last two dims laid out transposed", strided_copy, "inputs"),
)


def never_in(layout: Layout, model: torch.nn.Module) -> bool:
    """Whether ``model`` as given can never be in ``layout``: transposed parameters, where every
    parameter and buffer is contiguous (offsets stay possible: a file maps them so)."""
    tensors = model.state_dict(keep_vars=True).values()
    return (
        layout.relay is strided_copy
        and layout.on == "parameters"
        and all(t.is_contiguous() for t in tensors if isinstance(t, torch.Tensor))
    )


def layout_of(model: torch.nn.Module) -> str:
    """How the model's own parameters and buffers sit: how many are not contiguous and aligned."""
    tensors = list({id(t): t for t in model.state_dict(keep_vars=True).values()}.values())
    off = sum(1 for t in tensors if isinstance(t, torch.Tensor) and not is_aligned(t))
    if not off:
        return f"all {len(tensors)} parameters and buffers contiguous and aligned"
    return f"{off} of {len(tensors)} parameters and buffers not contiguous and aligned (loaded from a file?)"
