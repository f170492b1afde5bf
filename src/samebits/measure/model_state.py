"""The caller's model as it was: its training flags, ``requires_grad`` and where each parameter
and buffer sits (device, dtype), taken before samebits prepares it and given back after, so a
training loop that reuses the model finds it unchanged."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator

import torch
from samebits.models.inputs import Model
from torch import nn


Where = torch.Tensor | torch.device  # the tensor as it was, or (moved without a cast) its device


@dataclasses.dataclass
class ModelState:
    """What :meth:`restore` puts back. A tensor cast to another dtype is kept as it was (a cast
    back would not give the same bits); after :meth:`settle`, one only moved to another device is
    not kept (that would hold a second copy of the weights) but moved back. Buffers' values are
    kept too (BatchNorm's running statistics move in a forward in training mode)."""

    training: dict[nn.Module, bool]
    requires_grad: dict[nn.Parameter, bool]
    params: dict[nn.Parameter, Where]
    buffers: dict[tuple[nn.Module, str], Where]
    values: dict[
        tuple[nn.Module, str], torch.Tensor
    ]  # buffers' values, where kept (a forward in training mode moves them)

    @classmethod
    def of(cls, model: nn.Module, values: bool = True) -> ModelState:
        """The model's state now; ``values=False`` keeps no copy of the buffers' values (a holder
        whose own forwards never update them, and that must not undo the caller's updates)."""
        params: dict[nn.Parameter, Where] = {p: p.data for p in model.parameters()}
        buffers: dict[tuple[nn.Module, str], Where] = {
            (m, name): b for m in model.modules() for name, b in m._buffers.items() if b is not None
        }
        kept = {key: b.detach().clone() for key, b in buffers.items() if values and isinstance(b, torch.Tensor)}
        return cls(
            {m: m.training for m in model.modules()}, {p: p.requires_grad for p in params}, params, buffers, kept
        )

    def settle(self) -> bool:
        """After the model was prepared: forget tensors that were only moved (keep their device).
        Whether any parameter or buffer was moved or cast."""
        moved = False
        for p, was in self.params.items():
            if not _same(p.data, was):
                moved = True
                if isinstance(was, torch.Tensor) and p.data.dtype == was.dtype:
                    self.params[p] = was.device
        for (m, name), was in self.buffers.items():
            now = m._buffers.get(name)
            if not _same(now, was):
                moved = True
                if isinstance(was, torch.Tensor) and now is not None and now.dtype == was.dtype:
                    self.buffers[(m, name)] = was.device
        return moved

    def restore(self) -> None:
        """Put the training flags, ``requires_grad``, devices and dtypes back as they were."""
        with torch.no_grad():
            for p, was in self.params.items():
                if not _same(p.data, was):
                    p.data = _back(p.data, was)
            for (m, name), was in self.buffers.items():
                now = m._buffers.get(name)
                if now is not None:
                    m._buffers[name] = back = _back(now, was)
                    value = self.values.get((m, name))
                    if value is not None and not torch.equal(back, value.to(back.device, back.dtype)):
                        back.copy_(value)
        for p, flag in self.requires_grad.items():
            p.requires_grad_(flag)
        for m, flag in self.training.items():
            m.training = flag


def _same(now: torch.Tensor | None, was: Where) -> bool:
    """Whether ``now`` is the tensor ``was`` (the same storage, dtype and device)."""
    if now is None or isinstance(was, torch.device):
        return now is not None and isinstance(was, torch.device) and now.device == was
    return now.device == was.device and now.dtype == was.dtype and now.data_ptr() == was.data_ptr()


def _back(now: torch.Tensor, was: Where) -> torch.Tensor:
    if isinstance(was, torch.device):
        return now if now.device == was else now.to(was)
    return now if _same(now, was) else was


@contextlib.contextmanager
def model_given_back(model: Model) -> Iterator[None]:
    """Inside the block samebits may prepare ``model`` (eval, no grad, another device or dtype);
    on exit it is as it was."""
    if not isinstance(model, nn.Module):
        yield
        return
    state = ModelState.of(model)
    try:
        yield
    finally:
        state.restore()


@contextlib.contextmanager
def evaluating(modules: list[nn.Module]) -> Iterator[None]:
    """``modules`` in eval mode inside the block, their own flags put back after (a no-op where
    every one is in eval mode already: the usual case)."""
    training = [m for m in modules if m.training]
    for m in training:
        m.training = False
    try:
        yield
    finally:
        for m in training:
            m.training = True


_HELD: dict[int, tuple[ModelState, list[int]]] = {}  # id(model) -> (its state, [holders])
_HELD_LOCK = threading.Lock()


def hold(model: nn.Module) -> tuple[ModelState, Callable[[], None]]:
    """The model's state as the first of its current holders found it, and a release: when the
    last holder releases (several Predictors can share one model), the model is given back."""
    with _HELD_LOCK:
        state, holders = _HELD.setdefault(id(model), (ModelState.of(model, values=False), [0]))
        holders[0] += 1
    released = [False]

    def release() -> None:
        with _HELD_LOCK:
            if released[0]:
                return
            released[0] = True
            holders[0] -= 1
            if holders[0]:
                return
            _HELD.pop(id(model), None)
        state.restore()

    return state, release
