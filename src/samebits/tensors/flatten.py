"""Flatten any model output into an ordered ``{path: leaf}`` mapping."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

LEAF_TYPES = (torch.Tensor, int, float, bool, complex, str, bytes, type(None))


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten ``obj`` into ``{path: leaf}`` in a stable order.

    Paths look like ``[0].boxes``: ``[i]`` for sequence items, ``.name`` for dataclass and
    NamedTuple fields and for dict keys that are identifiers, ``['key']`` for other keys; dict
    keys are sorted. A bare leaf gets the path ``""`` (or ``prefix``). NumPy arrays become tensors.
    """
    out: dict[str, Any] = {}
    _flatten(obj, prefix, out)
    return out


def _flatten(obj: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(obj, LEAF_TYPES):
        out[path] = obj
    elif _is_numpy(obj):
        out[path] = torch.from_numpy(obj)
    elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple
        for name in obj._fields:
            _flatten(getattr(obj, name), f"{path}.{name}", out)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            _flatten(getattr(obj, field.name), f"{path}.{field.name}", out)
    elif isinstance(obj, dict):
        for key in sorted(obj, key=_key_order):
            _flatten(obj[key], f"{path}{_key_path(key)}", out)
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _flatten(item, f"{path}[{i}]", out)
    else:
        raise TypeError(f"cannot flatten a {type(obj).__name__} at path '{path or '<root>'}'")


def _is_numpy(obj: Any) -> bool:
    return type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray"


def _key_order(key: Any) -> tuple[str, str]:
    return (type(key).__name__, str(key))


def _key_path(key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"
