"""The runtime: ``samebits.Predictor``, inference done right by default.

Names are imported on first use, so ``samebits.runtime.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {"Predictor": "samebits.runtime.predictor", "BenchOptions": "samebits.runtime.options"}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
