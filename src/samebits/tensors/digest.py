"""Canonical, never-rounded digests of tensors and of flattened outputs."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

from samebits.tensors.tree import flatten


def _canonical(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_sparse:
        t = t.to_dense()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.cpu().contiguous()
    if (t.is_floating_point() or t.is_complex()) and t.numel() and _may_hold_nan(t):
        nan = torch.isnan(t)
        if bool(nan.any()):
            # Every NaN hashes as one canonical NaN: payloads and signs of NaNs carry no meaning.
            t = torch.where(nan, torch.full_like(t, float("nan")), t)
    return t


_NUMPY_FLOATS = {torch.float16, torch.float32, torch.float64}


def _may_hold_nan(t: torch.Tensor) -> bool:
    """False when ``t`` surely holds no NaN: its sum is finite (a NaN anywhere makes it NaN).
    One cheap pass; NumPy for small tensors, whose torch dispatch costs more than the work."""
    if t.numel() < 65536 and t.dtype in _NUMPY_FLOATS:
        with np.errstate(over="ignore", invalid="ignore"):
            return not np.isfinite(t.numpy().sum())  # an overflow to inf only costs the exact look
    return not bool(torch.isfinite(t.sum()).all())


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The contiguous CPU bytes of ``t`` (NaNs canonicalised), as hashed by :func:`digest`; no copy."""
    c = _canonical(t)
    if not c.numel():
        return memoryview(b"")
    if c.dtype in _NUMPY_FLOATS or c.dtype in (
        torch.int64,
        torch.int32,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.bool,
    ):
        return memoryview(c.numpy()).cast("B")
    return memoryview(c.reshape(-1).view(torch.uint8).numpy())


def digest(t: torch.Tensor) -> str:
    """sha256 over dtype, shape and the tensor's exact bytes; -0.0 and 0.0 differ, NaNs do not."""
    h = hashlib.sha256()
    h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(tensor_bytes(t))
    return h.hexdigest()


def leaf_digest(leaf: Any) -> str:
    """Digest of any flattened leaf: tensors by bits, other leaves by type and ``repr``."""
    if isinstance(leaf, torch.Tensor):
        return digest(leaf)
    return hashlib.sha256(f"{type(leaf).__name__}|{leaf!r}".encode()).hexdigest()


def digest_tree(obj: Any) -> dict[str, str]:
    """``{path: digest}`` for every leaf of a (nested) model output."""
    return {path: leaf_digest(leaf) for path, leaf in flatten(obj).items()}
