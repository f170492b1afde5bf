"""The contract, class 'answers': files samebits writes and reads back say what they are."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import samebits

from conftest import REPO, run_cli, scrubbed_env
from contract import one_error, snapshot


def test_cache_files_and_goldens_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        with samebits.Predictor(
            torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path / "c", tile=4
        ):
            pass
        samebits.record("demo:mlp", tmp_path / "g.safetensors")
    finally:
        os.umask(old)
    (calibration,) = (tmp_path / "c").glob("calibration-*.json")
    assert calibration.stat().st_mode & 0o777 == 0o644 and (tmp_path / "g.safetensors").stat().st_mode & 0o777 == 0o644


def test_a_truncated_calibration_is_healed(tmp_path):
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    with samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path, tile=4):
        pass
    (calibration,) = tmp_path.glob("calibration-*.json")
    calibration.write_text('{"scheme": "ti')
    with pytest.warns(UserWarning, match="rebuilt"):
        with samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path, tile=4) as p:
            assert "cached" not in p.invariance.measured and p.invariance.sizes == [4]
    assert json.loads(calibration.read_text())["sizes"] == [4]


def test_a_read_only_cache_is_used_by_another_user_without_writing(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="samebits-shared-", dir="/tmp"))  # outside root's private pytest folder
    shared.chmod(0o755)
    cache = shared / "cache"
    code = (
        "import torch, samebits\n"
        "torch.manual_seed(0)\n"
        f"p = samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir={str(cache)!r}, tile=4, deterministic=False)\n"
        "print(p.invariance.measured.get('cached'))\n"
    )
    first = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=scrubbed_env(), timeout=120
    )
    assert first.returncode == 0, first.stderr
    before = snapshot(cache)
    other = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=scrubbed_env(HOME="/tmp", PYTHONPATH=str(REPO / "src")),
        timeout=120,
    )
    assert other.returncode == 0, other.stderr
    try:
        assert other.stdout.strip() == "True" and snapshot(cache) == before
    finally:
        shutil.rmtree(shared)


def test_bench_with_a_zero_row_predict_is_one_line(tmp_path):
    with samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path, tile=4) as p:
        with pytest.raises(samebits.UserError, match="a batch of 0 rows"):
            p.predict(torch.randn(0, 4))


DATALOADER_LOOP = "import torch\nmodel = torch.nn.Linear(2, 2)\nfor x in []:\n    model(x)\n"


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"\xef\xbb\xbf" + DATALOADER_LOOP.encode(), "a UTF-8 BOM"),
        (("# -*- coding: latin-1 -*-\n# caf\xe9\n" + DATALOADER_LOOP).encode("latin-1"), "a latin-1 coding line"),
    ],
)
def test_lint_reads_python_as_python_does(tmp_path, data, what):
    (tmp_path / "script.py").write_bytes(data)
    out = run_cli("lint", str(tmp_path / "script.py"))
    assert "error" not in out.stdout and "in 1 file" in out.stdout, (what, out.stdout)
    compile(data, "script.py", "exec")  # Python itself reads it


def test_a_binary_file_is_named_as_skipped_never_as_linted(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x00\x01binary")
    one_error(run_cli("lint", str(tmp_path / "blob.py")), "no Python file could be read: ")
    (tmp_path / "real.py").write_text("import torch\n")
    out = run_cli("lint", str(tmp_path))
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == "0 findings in 1 file; 1 skipped"


def test_one_file_too_deep_to_parse_does_not_lose_the_other_files_findings(tmp_path):
    (tmp_path / "deep.py").write_text("x = " + " + ".join(["1"] * 100_000) + "\n")
    (tmp_path / "mistake.py").write_text('import torch\nstate = torch.load("w.pt", weights_only=False)\n')
    out = run_cli("lint", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "mistake.py:2" in out.stdout and "deep.py: error: " in out.stdout and "Traceback" not in out.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB file system (tmpfs): writes there run out of space. Needs the right to mount."""
    where = tmp_path / "full"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.decode().strip()[:80]})")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_during_record_and_predict_is_one_line_and_leaves_nothing_half_written(tmp_path, full_disk):
    import numpy as np

    (full_disk / "filler").write_bytes(b"x" * (256 * 1024 - 8192))  # what is left holds no golden
    one_error(run_cli("record", "demo:cnn", "-o", str(full_disk / "g.safetensors")), "No space left on device")
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((64, 256)).astype("float32"))
    out = full_disk / "out"
    run = run_cli("predict", "demo:mlp", str(tmp_path / "x.npy"), "-o", str(out), "--shard-size", "8")
    last = run.stderr.strip().splitlines()[-1]  # progress lines come before it
    assert run.returncode == 2 and "No space left on device" in last and "Traceback" not in run.stderr, run.stderr
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_write_refused_by_the_machine_is_a_user_error_with_no_temporary_file_left(tmp_path, monkeypatch):
    import errno

    import samebits.files

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(samebits.files.os, "link", no_space)
    with pytest.raises(samebits.UserError, match="cannot write .*g.safetensors.: No space left on device"):
        samebits.record("demo:mlp", tmp_path / "g.safetensors")
    assert list(tmp_path.iterdir()) == []
