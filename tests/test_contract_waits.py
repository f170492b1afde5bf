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


def test_lint_of_a_project_whose_requirements_file_is_a_fifo_or_a_folder_does_not_block(tmp_path):
    """Requirements files are read as regular files of bounded size only: a FIFO blocked lint
    forever, a folder named requirements-dev.txt lost the findings of the file next to it."""
    import os

    os.mkfifo(tmp_path / "requirements.txt")
    (tmp_path / "requirements-dev.txt").mkdir()
    (tmp_path / "a.py").write_text("import os\nos.environ['PYTHONHASHSEED'] = '0'\n")
    out = run_cli("lint", str(tmp_path), timeout=60)
    assert out.returncode == 1, out.stderr
    assert "SB101" in out.stdout and "error" not in out.stdout


@pytest.mark.parametrize(
    ("folder", "fifo", "argv"),
    [
        ("cache", "manifest.json", ("cache", "list", "--cache-dir", "{dir}")),
        ("rep", "repro.json", ("check", "demo:mlp", "--from", "{dir}")),
        ("rep", "report.json", ("check", "demo:mlp", "--from", "{dir}")),
    ],
)
def test_a_fifo_where_samebits_reads_its_own_json_is_one_line(tmp_path, folder, fifo, argv):
    import os

    where = tmp_path / folder
    where.mkdir()
    (where / ".samebits-cache").write_text('{"samebits_cache": 1}\n')
    if folder == "rep":
        (where / "repro.json").write_text('{"kind": "samebits-check-repro", "options": {}}')
        (where / "report.json").write_text("{}")
    (where / fifo).unlink(missing_ok=True)
    os.mkfifo(where / fifo)
    start = time.monotonic()
    out = run_cli(*(a.format(dir=where) for a in argv), timeout=60)
    assert out.returncode in (0, 2) and "Traceback" not in out.stderr, out.stderr
    assert time.monotonic() - start < 30
