"""``samebits doctor``: production mistakes found by running the model and measuring."""

from samebits.diagnosis.report import DoctorFinding, DoctorReport, ProbeStatus
from samebits.diagnosis.run import doctor

__all__ = ["DoctorFinding", "DoctorReport", "ProbeStatus", "doctor"]
