"""``samebits doctor``: production mistakes found by running the model and measuring.

Names are imported on first use, so ``samebits.diagnosis.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DoctorOptions": "samebits.diagnosis.options",
    "DoctorFinding": "samebits.diagnosis.report",
    "DoctorReport": "samebits.diagnosis.report",
    "ProbeStatus": "samebits.diagnosis.report",
    "doctor": "samebits.diagnosis.run",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'samebits.diagnosis' has no attribute {name!r}")
