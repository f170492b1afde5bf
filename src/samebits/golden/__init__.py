"""Goldens: model outputs pinned in one safetensors file, verified later on any machine.

Names are imported on first use, so ``samebits.golden.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {
    "Golden": "samebits.golden.format",
    "read_golden": "samebits.golden.format",
    "record": "samebits.golden.record",
    "RecordOptions": "samebits.golden.options",
    "VerifyReport": "samebits.golden.verify",
    "verify": "samebits.golden.verify",
}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
