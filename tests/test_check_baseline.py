"""`samebits check` gives the verdicts, origins and causes captured in tests/baselines/check.json
(by tests/baselines/capture_check.py) on every model of the suite: a faster check must find the
same things. The batch, threads and layout axes depend on the CPU's GEMM kernels and are compared
only on a CPU of the captured kind (the same ATen capability and vendor: an Intel and an AMD AVX512
machine pick other kernels)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import samebits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
from capture_check import cpu_kind, specs, summary  # noqa: E402

BASELINE = json.loads((HERE / "baselines" / "check.json").read_text())
KERNEL_AXES = {"batch": "batch-size", "threads": "thread-count", "layout": "memory-layout"}  # axis -> its cause
# where a row's position in a batch changes its bits is a fact of the GEMM kernels too, and the
# baseline was captured before it was a cause of its own: it is compared on no CPU
UNCAPTURED = ("position-dependent",)


def same_cpu_kind() -> bool:
    """Whether this CPU is of the kind the baseline was captured on."""
    return cpu_kind() == BASELINE["cpu_kind"]


def _without_kernel_axes(summary: dict) -> dict:
    summary = json.loads(json.dumps(summary))
    summary["causes"] = [c for c in summary["causes"] if c not in UNCAPTURED]
    if not same_cpu_kind():
        for axis, cause in KERNEL_AXES.items():
            summary["axes"].pop(axis, None)
            summary["causes"] = [c for c in summary["causes"] if c != cause]
    return summary


def expected(name: str) -> dict:
    """The baseline of ``name``, without the kernel-dependent axes (and causes) on another kind of CPU."""
    return _without_kernel_axes(BASELINE["models"][name])


def found(report) -> dict:
    return _without_kernel_axes(summary(report))


@pytest.mark.parametrize("name", [n for n in BASELINE["models"] if not n.startswith("real_models:")])
def test_check_finds_what_the_baseline_found(name):
    assert found(samebits.check(specs()[name])) == expected(name)
