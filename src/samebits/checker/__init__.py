"""``samebits check``: run a model under every variation that changes bits, find where and why."""

from samebits.checker.context import CheckOptions
from samebits.checker.report import AXES, AxisResult, Cause, CheckReport, Origin
from samebits.checker.run import check

__all__ = ["AXES", "AxisResult", "Cause", "CheckOptions", "CheckReport", "Origin", "check"]
