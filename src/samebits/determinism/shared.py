"""One determinism profile shared by every live deterministic Predictor: the first entered
enters it (seeding with its seed), the last to close (or be collected) exits it, so Predictors
closed in any order leave every switch as it was before the first."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

_LOCK = threading.Lock()
_COUNT = 0
_CONTEXT: AbstractContextManager[Any] | None = None


def acquire_profile(seed: int, device: str) -> None:
    """Count one more user of the shared profile, entering it for the first."""
    global _COUNT, _CONTEXT
    from samebits.determinism.context import deterministic

    with _LOCK:
        if _COUNT == 0:
            context = deterministic(seed, device=device)
            context.__enter__()
            _CONTEXT = context
        _COUNT += 1


def release_profile() -> None:
    """Count one user fewer, exiting the profile (every switch restored) after the last."""
    global _COUNT, _CONTEXT
    with _LOCK:
        _COUNT -= 1
        if _COUNT == 0:
            context, _CONTEXT = _CONTEXT, None
            if context is not None:
                context.__exit__(None, None, None)
