"""Goldens: model outputs pinned in one safetensors file, verified later on any machine."""

from samebits.golden.format import Golden, read_golden
from samebits.golden.record import record
from samebits.golden.verify import VerifyReport, verify

__all__ = ["Golden", "VerifyReport", "read_golden", "record", "verify"]
