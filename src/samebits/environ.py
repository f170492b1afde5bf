"""The process environment, changed for a block and put back after."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def environ_kept(*keys: str) -> Iterator[None]:
    """Put ``keys`` of ``os.environ`` back as they were when the block began (set, changed or
    removed meanwhile)."""
    before = {k: os.environ.get(k) for k in keys}
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
