"""``samebits doctor``: production mistakes found by running the model and measuring."""

from samebits.doctor.report import DoctorFinding, DoctorReport, ProbeStatus
from samebits.doctor.run import doctor

__all__ = ["DoctorFinding", "DoctorReport", "ProbeStatus", "doctor"]

from samebits._callable import make_callable  # noqa: E402

make_callable(__name__, doctor)
