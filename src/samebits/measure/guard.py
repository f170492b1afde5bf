"""Running a user's model safely: a first forward that fails is one line, the model's buffers and
training flags are put back, and inputs are described in a few words."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from samebits.errors import UserError, first_line
from samebits.models.inputs import Model, ModelInputs
from samebits.tensors import tree
from samebits.rules.causes import fix_of
from samebits.environ import environ_kept


class ForwardError(UserError):
    """The model's forward raised on the given inputs."""


# Modules whose forward differs between training and eval mode.
TRAINING_SENSITIVE = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._NormBase, nn.RReLU)


@functools.lru_cache(maxsize=None)
def _forward_reads_training(cls: type) -> bool:
    """Whether ``cls.forward``'s own source reads ``self.training`` (a detector's top level)."""
    forward = getattr(cls, "forward", None)
    if forward is None or cls.__module__.startswith("torch."):
        return False
    try:
        return "self.training" in inspect.getsource(forward)
    except (OSError, TypeError):
        return False


def training_modules(model: Model) -> list[tuple[str, str]]:
    """``(path, type)`` of the modules in training mode whose forward depends on it: dropout,
    batch norm and RReLU, and any module whose own ``forward`` reads ``self.training``. Read
    from the module flags alone: no forward is run."""
    if not isinstance(model, nn.Module):
        return []
    return [
        (name or "<model>", type(m).__name__)
        for name, m in model.named_modules()
        if m.training and (isinstance(m, TRAINING_SENSITIVE) or _forward_reads_training(m.__class__))
    ]


def training_note(model: Model) -> str:
    """``"; the model is in training mode (...)"`` where it is, else ``""``."""
    found = training_modules(model)
    if not found:
        return ""
    names = ", ".join(f"{n} ({t})" for n, t in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return f"; the model is in training mode ({names}): {fix_of('training-mode')}"


def check_forward(model: Model, inputs: ModelInputs, *, need_tensor: bool = False) -> Any:
    """One forward under ``no_grad``, its output returned; an exception becomes a one-line
    :class:`ForwardError` (which says so where the model is in training mode, the usual
    reason). With ``need_tensor``, an output that holds no tensor is one too."""
    try:
        with torch.no_grad():
            output = inputs.call(model)
    except Exception as exc:
        raise ForwardError(
            f"the model's forward raised {first_line(exc, with_type=True)}{training_note(model)}"
        ) from exc
    if need_tensor and not tree.tensors(output):
        raise ForwardError(
            f"the model's output holds no tensor (it returned {type(output).__name__} {str(output)[:40]!r}); samebits compares the tensors a model computes"
        )
    return output


# Variables torch writes into os.environ behind the caller's back (importing torch._dynamo,
# which a dispatch mode or torch.compile does, sets the inductor cache folder).
TORCH_SET_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def torch_env_kept() -> contextlib.AbstractContextManager[None]:
    """Put back :data:`TORCH_SET_ENV` as they were when the block began."""
    return environ_kept(*TORCH_SET_ENV)


@contextlib.contextmanager
def model_state_kept(model: Model) -> Iterator[Callable[[], None]]:
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
