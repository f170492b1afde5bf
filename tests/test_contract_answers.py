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

from conftest import REPO, scrubbed_env
from contract import snapshot


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
