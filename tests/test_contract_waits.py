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


@pytest.mark.parametrize(
    "command",
    [
        ["check", "{m}", "--timeout", "2"],
        ["doctor", "{m}", "--timeout", "2"],
        ["record", "{m}", "-o", "{tmp}/g.safetensors"],
        ["predict", "{m}", "{tmp}/x.npy", "-o", "{tmp}/out"],
    ],
    ids=lambda c: c[0],
)
def test_a_model_whose_factory_never_returns_ends_in_one_line(tmp_path, command):
    import numpy as np

    from conftest import scrubbed_env

    np.save(tmp_path / "x.npy", np.zeros((4, 3), dtype="float32"))
    argv = [a.format(m=m("hangs_in_factory"), tmp=tmp_path) for a in command]
    start = time.monotonic()
    out = run_cli(*argv, env=scrubbed_env(SAMEBITS_LOAD_TIMEOUT="2"), timeout=60)
    one_error(out, "loading it (its import and factory) made no progress for 2 s")
    assert time.monotonic() - start < 30 and not (tmp_path / "g.safetensors").exists()


def test_lint_of_a_folder_holding_a_fifo_does_not_block(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.py")  # a reader of it would wait for a writer forever
    (tmp_path / "model.py").write_text("import torch\n")
    start = time.monotonic()
    out = run_cli("lint", str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pipe.py: skipped: not a regular file" in out.stdout and "0 findings in 1 file; 1 skipped" in out.stdout
    assert time.monotonic() - start < 30
