"""``--device`` on every command that runs a model (B7): on this machine ``--device cuda`` is one
line, exit 2, before any work; ``--device cpu`` works as before (the commands' own tests)."""

from __future__ import annotations

import pytest
import torch

from conftest import run_cli

COMMANDS = {
    "check": ["check", "demo:mlp", "--axes", "repeat"],
    "doctor": ["doctor", "demo:mlp"],
    "bench": ["bench", "demo:mlp", "--no-memory"],
    "record": ["record", "demo:mlp", "-o", "{tmp}/g.safetensors"],
    "predict": ["predict", "demo:mlp", "{tmp}", "-o", "{tmp}/out"],
    "serve": ["serve", "demo:mlp"],
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: --device cuda would run")
@pytest.mark.parametrize("command", list(COMMANDS))
def test_device_cuda_without_cuda_is_one_line_before_any_work(command, tmp_path):
    args = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    result = run_cli(*args, "--device", "cuda", timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "samebits: error: device 'cuda' was asked for, but CUDA is not available here (torch build or driver)"
    ]
    assert not (tmp_path / "g.safetensors").exists() and not (tmp_path / "out").exists()


def test_an_unknown_device_is_one_line(tmp_path):
    result = run_cli("bench", "demo:mlp", "--device", "tpu")
    assert result.returncode == 2 and "unknown device 'tpu'; use cpu, cuda, cuda:N or mps" in result.stderr
