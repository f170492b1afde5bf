"""Filling uninitialized memory only for the forwards that can read it.

The deterministic profile sets ``torch.utils.deterministic.fill_uninitialized_memory``: under
deterministic algorithms every ``at::empty`` is then filled with NaN (integers: their maximum)
before use, so a model that reads ``torch.empty`` garbage gives the same bits on every run. The
fill is one more pass over every buffer a kernel allocates, output or workspace (measured 1.05-1.1x
a demo:cnn forward), and changes nothing where every allocation belongs to a kernel that writes it
whole. Memory comes back to the code above the kernels uninitialized only through a few ATen
ops (``empty*``, ``new_empty*``, ``resize_``, ``set_``, ...), and every such call, from Python, a
composite op or a C++ extension, passes the dispatcher where a ``TorchDispatchMode`` sees it; the
kernels' own allocations do not. :func:`asks_for_uninitialized` runs one forward under such a
probe; a model whose forward makes none of those calls runs under :func:`filling` with
``needed=False``, which turns the fill off for its forwards only.

The flag is process-wide: forwards that need it and forwards that do not may run at the same
time in other threads (a server with two models), so the flag is off only while forwards that do
not need it run and none that does (counted under one lock); otherwise it is what it was.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

# aten ops that hand uninitialized memory to their caller (names, and prefixes ending in '*')
_UNINITIALIZED = ("empty*", "new_empty*", "_empty*", "resize*", "_resize*", "set_")


def _hands_out_uninitialized(name: str) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in _UNINITIALIZED)


def asks_for_uninitialized(forward: Callable[[], Any]) -> str | None:
    """Run ``forward()`` once under a dispatcher probe: the first aten op that hands uninitialized
    memory to the code above the kernels (``"aten.empty"``), or ``None`` where it made no such call.
    A forward the probe cannot follow counts as asking (the fill stays on)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Probe(TorchDispatchMode):
        found: str | None = None

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = func.overloadpacket.__name__
            if self.found is None and _hands_out_uninitialized(name):
                self.found = f"aten.{name}"
            return func(*args, **(kwargs or {}))

    probe = Probe()
    try:
        with probe:
            forward()
    except Exception as exc:  # the forward itself raises later, where its error is explained
        return f"a forward the probe could not follow ({type(exc).__name__})"
    return probe.found


_LOCK = threading.Lock()
_needing = _skipping = 0
_base = True  # the flag's value when no forward counted here runs


def _set(value: bool) -> None:
    torch.utils.deterministic.fill_uninitialized_memory = value  # type: ignore[attr-defined]


def _update(needing: int, skipping: int) -> None:
    global _needing, _skipping, _base
    with _LOCK:
        if _needing == 0 and _skipping == 0:
            _base = bool(torch.utils.deterministic.fill_uninitialized_memory)  # type: ignore[attr-defined]
        _needing += needing
        _skipping += skipping
        _set(False if _skipping and not _needing else _base)


@contextlib.contextmanager
def filling(needed: bool) -> Iterator[None]:
    """One forward: with the fill as the profile set it where ``needed``, else without it (unless
    a forward that needs it runs at the same time)."""
    step = (1, 0) if needed else (0, 1)
    _update(*step)
    try:
        yield
    finally:
        _update(-step[0], -step[1])
