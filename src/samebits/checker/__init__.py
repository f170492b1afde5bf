"""``samebits check``: run a model under every variation that changes bits, find where and why.

Names are imported on first use, so ``samebits.checker.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

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

__getattr__ = lazy_getattr(__name__, _EXPORTS)
