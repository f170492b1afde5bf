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
not need it run and none that does (counted under one lock); otherwise it has its base value,
the one the profile (or the user, while no counted forward runs) set. The profile reads and
writes that base through :func:`base_value` and :func:`set_base` (determinism/catalog.py), so it
never saves or restores the transient off. Code that runs torch ops in another thread of the same
process while a forward without the fill runs (not through a Predictor) runs without it too; a
forward's ops in threads it starts are not seen by the probe (dispatch modes are per thread).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

# aten ops that hand uninitialized memory to their caller (names, and prefixes ending in '*')
_UNINITIALIZED = ("empty*", "new_empty*", "_empty*", "resize*", "_resize*", "set_")
# namespaces whose ops are torch's own kernels; any other op (torch.library.custom_op, a C++
# extension's TORCH_LIBRARY op, a Triton wrapper) may allocate inside, where no probe sees it
_TORCH_NAMESPACES = ("aten", "prims")


def _asks(func: Any) -> str | None:
    namespace = getattr(func, "namespace", "aten")
    name = func.overloadpacket.__name__
    if namespace not in _TORCH_NAMESPACES:
        return f"{namespace}.{name} (an op outside torch's own)"
    if any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in _UNINITIALIZED):
        return f"{namespace}.{name}"
    return None


def asks_for_uninitialized(forward: Callable[[], Any]) -> str | None:
    """Run ``forward()`` once under a dispatcher probe: the first op that hands uninitialized
    memory to the code above the kernels (``"aten.empty"``), or may allocate where the probe cannot
    see (an op outside aten/prims); ``None`` where it made no such call. A forward the probe
    cannot follow counts as asking (the fill stays on)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Probe(TorchDispatchMode):
        found: str | None = None

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch wraps __torch_dispatch__ so that Dynamo never compiles inside it, importing
            # Dynamo to do so (0.85 s). Where Dynamo is not loaded nothing was compiled; a forward
            # that compiles lazily loads it here, and Dynamo gives up on the probe's frames (same
            # answer, checked with the eager and inductor backends)
            return "torch._dynamo" in sys.modules

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if self.found is None:
                self.found = _asks(func)
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
_base = True  # the flag's value apart from forwards that skip it (authoritative while one is counted)


def _read() -> bool:
    return bool(torch.utils.deterministic.fill_uninitialized_memory)  # type: ignore[attr-defined]


def _write(value: bool) -> None:
    torch.utils.deterministic.fill_uninitialized_memory = value  # type: ignore[attr-defined]


def _apply() -> None:
    """Under the lock: the flag as the counts say."""
    _write(False if _skipping and not _needing else _base)


def base_value() -> bool:
    """The flag as the profile or the user set it (never a skipping forward's transient off)."""
    with _LOCK:
        return _base if _needing or _skipping else _read()


def set_base(value: bool) -> None:
    """Set the flag's base value (the profile entering or leaving); applied at once unless a
    forward that skips the fill runs and none that needs it."""
    global _base
    with _LOCK:
        _base = bool(value)
        _apply()


def _count(needing: int, skipping: int) -> None:
    global _needing, _skipping, _base
    with _LOCK:
        if _needing == 0 and _skipping == 0:
            _base = _read()  # idle until now: what is set is the base
        _needing += needing
        _skipping += skipping
        _apply()


@contextlib.contextmanager
def filling(needed: bool) -> Iterator[None]:
    """One forward (or a block of them): with the fill at its base value where ``needed``, else
    without it (unless a forward that needs it runs at the same time)."""
    step = (1, 0) if needed else (0, 1)
    _count(*step)
    try:
        yield
    finally:
        _count(-step[0], -step[1])
