"""The contract, class 'waits': every wait samebits makes is bounded."""

from __future__ import annotations

import time

import pytest


from conftest import run_cli
from contract import m, one_error


@pytest.mark.parametrize(
    "command", [["check"], ["doctor", "--backends", ""], ["bench", "--no-memory", "--backends", "eager"]]
)
def test_a_forward_that_never_returns_ends_in_one_line(tmp_path, command):
    start = time.monotonic()
    out = run_cli(*command[:1], m("hang"), *command[1:], "--timeout", "2", timeout=60)
    one_error(out, "a forward made no progress for 2 s")
    assert time.monotonic() - start < 30
