"""``samebits doctor``: production mistakes found by running the model and measuring.

Names are imported on first use, so ``samebits.diagnosis.options`` (the defaults the CLI shows)
does not import torch."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {
    "DoctorOptions": "samebits.diagnosis.options",
    "DoctorFinding": "samebits.diagnosis.report",
    "DoctorReport": "samebits.diagnosis.report",
    "ProbeStatus": "samebits.diagnosis.report",
    "doctor": "samebits.diagnosis.run",
}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
