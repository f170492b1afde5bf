"""``samebits check``: run a model under every variation that changes bits, find where and why."""

from samebits.check.context import CheckOptions
from samebits.check.report import AXES, AxisResult, Cause, CheckReport, Origin
from samebits.check.run import check

__all__ = ["AXES", "AxisResult", "Cause", "CheckOptions", "CheckReport", "Origin", "check"]

from samebits._callable import make_callable  # noqa: E402

make_callable(__name__, check)
