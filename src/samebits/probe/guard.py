"""Running a user's model safely: a first forward that fails is one line, the model's buffers and
training flags are put back, and inputs are described in a few words."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs


class ForwardError(UserError):
    """The model's forward raised on the given inputs."""


def check_forward(model: Any, inputs: ModelInputs) -> None:
    """One forward under ``no_grad``; an exception becomes a one-line :class:`ForwardError`."""
    try:
        with torch.no_grad():
            inputs.call(model)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise ForwardError(f"the model's forward raised {type(exc).__name__}: {text[0] if text else ''}") from exc


@contextlib.contextmanager
def model_state_kept(model: Any) -> Iterator[Callable[[], None]]:
    """Yield a function that puts the model's buffers and training flags back as they were now;
    it runs again on exit, so the caller leaves the user's model as it found it."""
    if not isinstance(model, nn.Module):
        yield lambda: None
        return
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    flags = {name: m.training for name, m in model.named_modules()}

    def reset() -> None:
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers:
                    b.copy_(buffers[name])
        for name, m in model.named_modules():
            m.training = flags.get(name, m.training)

    try:
        yield reset
    finally:
        reset()


def describe_inputs(inputs: ModelInputs) -> str:
    """``float32[8, 256], mask=bool[8]``: the inputs in a few words."""

    def one(x: Any) -> str:
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
        if isinstance(x, list) and x and all(isinstance(t, torch.Tensor) for t in x):
            return f"list of {len(x)} × {one(x[0])}"
        return type(x).__name__

    parts = [one(a) for a in inputs.args] + [f"{k}={one(v)}" for k, v in inputs.kwargs.items()]
    return ", ".join(parts) or "no arguments"
