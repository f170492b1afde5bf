"""Where tensors sit in memory: the same values re-laid at an offset from an aligned address, with
transposed strides, or in fresh aligned storage; a model's parameters and buffers re-laid for a
block; and :func:`align_parameters`, the fix when the bits depend on it.

Kernels may pick another path by a pointer's alignment or a tensor's strides (MKL's GEMM on some
CPUs does): weights loaded from a file (safetensors maps them at the file's offsets, ``from_pretrained``
leaves them there) can give other bits than the same weights built in memory."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

OFFSET_BYTES = 40  # the offset measured where a loaded GPT-style model generated other tokens
ALIGNMENT = 64  # bytes: torch's CPU allocator aligns fresh storage to this (cache lines, AVX512)

Relay = Callable[[torch.Tensor], torch.Tensor]


def aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """The values of ``t`` in fresh, contiguous storage (aligned by torch's allocator)."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def offset_copy(t: torch.Tensor, offset: int = OFFSET_BYTES) -> torch.Tensor:
    """The values of ``t``, contiguous, starting ``offset`` bytes past an ``ALIGNMENT``-byte
    boundary (rounded down to whole elements; at least one element)."""
    size = t.element_size()
    skip = max(1, offset // size)
    room = ALIGNMENT // size + skip
    buffer = torch.empty(t.numel() + room, dtype=t.dtype, device=t.device)
    start = (-(buffer.data_ptr() % ALIGNMENT) % ALIGNMENT) // size + skip
    out = buffer[start : start + t.numel()].view(t.shape)
    out.copy_(t.detach())
    return out


def strided_copy(t: torch.Tensor) -> torch.Tensor:
    """The values of ``t`` with its last two dims laid out transposed (column-major), as a view of
    a transposed checkpoint is; tensors under 2-D are returned as they are."""
    if t.dim() < 2:
        return t.detach()
    return t.detach().transpose(-1, -2).contiguous().transpose(-1, -2)


def is_aligned(t: torch.Tensor) -> bool:
    """True when ``t`` is contiguous and starts on an ``ALIGNMENT``-byte boundary."""
    return t.is_contiguous() and t.data_ptr() % ALIGNMENT == 0


def _tensors(model: torch.nn.Module) -> Iterator[tuple[torch.nn.Module, str, bool]]:
    """(module, name, is_parameter) for every parameter and buffer the module holds itself."""
    for module in model.modules():
        for name, p in module._parameters.items():
            if p is not None:
                yield module, name, True
        for name, b in module._buffers.items():
            if b is not None:
                yield module, name, False


@contextlib.contextmanager
def relaid(model: torch.nn.Module, how: Relay) -> Iterator[int]:
    """Inside the block, every parameter and buffer of ``model`` holds ``how(tensor)``'s storage
    (shared tensors stay shared); put back after. Yields how many tensors were re-laid."""
    params: dict[int, tuple[torch.nn.Parameter, torch.Tensor]] = {}  # id -> (parameter, its data before)
    buffers: dict[int, torch.Tensor] = {}  # id of a buffer -> its re-laid copy
    swapped: list[tuple[torch.nn.Module, str, torch.Tensor]] = []
    try:
        with torch.no_grad():
            for module, name, is_param in _tensors(model):
                if is_param:
                    p = module._parameters[name]
                    assert p is not None
                    if id(p) not in params:  # a tied parameter is one object: re-laid once
                        params[id(p)] = (p, p.data)
                        p.data = how(p.data)
                    continue
                b = module._buffers[name]
                assert b is not None
                if id(b) not in buffers:
                    buffers[id(b)] = how(b)
                swapped.append((module, name, b))
                module._buffers[name] = buffers[id(b)]
        yield len(params) + len(buffers)
    finally:
        with torch.no_grad():
            for module, name, old in swapped:
                module._buffers[name] = old
            for p, data in params.values():
                p.data = data


def align_parameters(model: torch.nn.Module) -> torch.nn.Module:
    """Copy every parameter and buffer of ``model`` that is not contiguous and aligned into fresh
    aligned storage, in place, and return the model: after loading weights from a file, so the
    model gives the bits it gives when built in memory (where those depend on the layout)."""
    with torch.no_grad():
        for module, name, is_param in list(_tensors(model)):
            t = module._parameters[name] if is_param else module._buffers[name]
            assert t is not None
            if is_aligned(t):
                continue
            if is_param:
                t.data = aligned_copy(t.data)
            else:
                module._buffers[name] = aligned_copy(t)
    return model
