"""``samebits check``: run a model under every variation that changes bits, find where and why.

Names are imported on first use, so ``samebits.checker.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CheckOptions": "samebits.checker.options",
    "AXES": "samebits.checker.report",
    "AxisResult": "samebits.checker.report",
    "Cause": "samebits.checker.report",
    "CheckReport": "samebits.checker.report",
    "Origin": "samebits.checker.report",
    "check": "samebits.checker.run",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'samebits.checker' has no attribute {name!r}")
