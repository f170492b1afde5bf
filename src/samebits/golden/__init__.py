"""Goldens: model outputs pinned in one safetensors file, verified later on any machine.

Names are imported on first use, so ``samebits.golden.options`` (the defaults the CLI shows)
does not import torch. The modules are named ``recorder`` and ``verifier``, not after the
functions, so that importing one never rebinds ``samebits.golden.record`` to a module."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {
    "Golden": "samebits.golden.format",
    "read_golden": "samebits.golden.format",
    "record": "samebits.golden.recorder",
    "RecordOptions": "samebits.golden.options",
    "VerifyReport": "samebits.golden.verifier",
    "verify": "samebits.golden.verifier",
}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
