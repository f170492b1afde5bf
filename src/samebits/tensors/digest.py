"""Canonical, never-rounded digests of tensors and of flattened outputs.

Two algorithms, named wherever a digest is stored: ``sha256`` (the default; cryptographic, for
goldens, caches and anything written to a file) and ``xxh3-128`` (a 128-bit non-cryptographic hash
of the same bytes, 4-40x faster here, for digests that live within one run: per-module traces,
batch rows). See bench/digest_speed.py.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Literal

import torch
import xxhash

from samebits.tensors.tree import flatten

Algorithm = Literal["sha256", "xxh3-128"]
FILE_DIGEST: Algorithm = "sha256"  # goldens and caches
RUN_DIGEST: Algorithm = "xxh3-128"  # traces and rows compared within one run
ALGORITHMS: tuple[Algorithm, ...] = ("sha256", "xxh3-128")


def hasher(algorithm: Algorithm = FILE_DIGEST) -> Any:
    """A fresh hash object (``update``/``hexdigest``) of ``algorithm``."""
    if algorithm == "xxh3-128":
        return xxhash.xxh3_128()
    if algorithm == "sha256":
        return hashlib.sha256()
    raise ValueError(f"unknown digest algorithm {algorithm!r}; samebits knows {', '.join(ALGORITHMS)}")


def _canonical(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.layout is not torch.strided:
        t = t.to_dense()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if (t.is_floating_point() or t.is_complex()) and t.numel() and _has_nan(t):
        # Every NaN hashes as one canonical NaN: payloads and signs of NaNs carry no meaning.
        t = torch.where(torch.isnan(t), torch.full_like(t, float("nan")), t)
    return t


_NUMPY_FLOATS = {torch.float16, torch.float32, torch.float64}
_NUMPY_VIEWS = {*_NUMPY_FLOATS, torch.int64, torch.int32, torch.uint8, torch.int8, torch.int16, torch.bool}


def _has_nan(t: torch.Tensor) -> bool:
    """Whether ``t`` holds a NaN: its maximum is NaN exactly then (max propagates NaN and, unlike
    a sum, cannot overflow or warn). NumPy for small tensors, whose torch dispatch costs more
    than the work."""
    if t.numel() < 65536 and t.dtype in _NUMPY_FLOATS:
        return math.isnan(t.numpy().max())
    if t.is_complex():
        t = torch.view_as_real(t)
    return bool(t.max().isnan())


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The contiguous CPU bytes of ``t`` (NaNs canonicalised), as hashed by :func:`digest`; no copy
    of a contiguous CPU tensor."""
    if (
        t.dtype in (torch.float32, torch.float64)
        and t.layout is torch.strided
        and t.device.type == "cpu"
        and t.is_contiguous()
        and not t.is_neg()
        and t.numel()
    ):  # the common case, in one pass less: a dense CPU float tensor seen through NumPy
        array = t.detach().numpy()
        if not math.isnan(array.max()):
            return array.data.cast("B")
    c = _canonical(t)
    if not c.numel():
        return memoryview(b"")
    if c.dtype in _NUMPY_VIEWS:
        return c.numpy().data.cast("B")
    return c.reshape(-1).view(torch.uint8).numpy().data


def digest(t: Any, algorithm: Algorithm = FILE_DIGEST) -> str:
    """A hash of a tensor's dtype, shape and exact bytes (-0.0 and 0.0 differ, NaNs do not); of
    any other output (a dict, tuple, ``ModelOutput``, ...), one hash over its paths and its leaves'
    digests (:func:`digest_tree` gives them path by path)."""
    h = hasher(algorithm)
    if not isinstance(t, torch.Tensor):
        from samebits.tensors.tree import flatten

        for path, leaf in flatten(t).items():
            h.update(f"{path}={leaf_digest(leaf, algorithm)};".encode())
        return h.hexdigest()
    h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(tensor_bytes(t))
    return h.hexdigest()


def leaf_digest(leaf: Any, algorithm: Algorithm = FILE_DIGEST) -> str:
    """Digest of any flattened leaf: tensors by bits, other leaves by type and ``repr``."""
    if isinstance(leaf, torch.Tensor):
        return digest(leaf, algorithm)
    h = hasher(algorithm)
    h.update(f"{type(leaf).__name__}|{leaf!r}".encode())
    return h.hexdigest()


def digest_tree(obj: object, algorithm: Algorithm = FILE_DIGEST) -> dict[str, str]:
    """``{path: digest}`` for every leaf of a (nested) model output."""
    return {path: leaf_digest(leaf, algorithm) for path, leaf in flatten(obj).items()}


def weights_digests(model: object, algorithm: Algorithm = FILE_DIGEST) -> dict[str, str]:
    """``{name: digest}`` for every parameter and buffer of an ``nn.Module`` (empty otherwise)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    named = list(model.named_parameters()) + list(model.named_buffers())
    return {name: digest(t.detach(), algorithm) for name, t in named}


def weights_changed(recorded: dict[str, str], model: object, algorithm: Algorithm = FILE_DIGEST) -> list[str]:
    """The parameters and buffers whose bits differ from ``recorded`` (or that one side lacks),
    in the model's order."""
    now = weights_digests(model, algorithm)
    return [n for n in now if recorded.get(n) != now[n]] + [n for n in recorded if n not in now]
