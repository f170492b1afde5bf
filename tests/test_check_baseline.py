"""`samebits check` gives the verdicts, origins and causes captured in tests/baselines/check.json
(by tests/baselines/capture_check.py) on every model of the suite: a faster check must find the
same things. The batch axis depends on the CPU's GEMM kernels and is compared only on a CPU of
the captured kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import samebits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
from capture_check import specs, summary  # noqa: E402

BASELINE = json.loads((HERE / "baselines" / "check.json").read_text())


def expected(name: str) -> dict:
    """The baseline of ``name``, without the batch axis (and its cause) on another kind of CPU."""
    want = json.loads(json.dumps(BASELINE["models"][name]))
    if torch.backends.cpu.get_cpu_capability() != BASELINE["cpu_capability"]:
        want["axes"].pop("batch", None)
        want["causes"] = [c for c in want["causes"] if c != "batch-size"]
    return want


def found(report) -> dict:
    got = summary(report)
    if torch.backends.cpu.get_cpu_capability() != BASELINE["cpu_capability"]:
        got["axes"].pop("batch", None)
        got["causes"] = [c for c in got["causes"] if c != "batch-size"]
    return got


@pytest.mark.parametrize("name", [n for n in BASELINE["models"] if not n.startswith("real_models:")])
def test_check_finds_what_the_baseline_found(name):
    assert found(samebits.check(specs()[name])) == expected(name)
