"""docs/gpu.md's set-up for a GPU machine: constraints-gpu.txt keeps constraints.txt's pins but the
CPU build's (torch from PyPI is the CUDA build, which requires its own Triton: constraints.txt's
triton==3.9.0 cannot resolve beside it), and the documented pip commands resolve against the
package registries (pip's --dry-run; skipped with the reason where a registry does not answer)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPI = "https://pypi.org/simple"
NVIDIA = "https://pypi.nvidia.com"
RESOLVE_SECONDS = 600


def pins(path: Path) -> dict[str, str]:
    """``{name: version}`` of a constraints file's ``name==version`` lines."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


def setup_commands() -> list[str]:
    """The ``pip install`` lines of docs/gpu.md's set-up block."""
    text = (REPO / "docs" / "gpu.md").read_text()
    section = text.split("## Set-up on a GPU machine", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "docs/gpu.md's set-up section has no bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip().startswith("pip install")]


def test_the_gpu_constraints_keep_every_pin_but_the_cpu_builds():
    cpu, gpu = pins(REPO / "constraints.txt"), pins(REPO / "constraints-gpu.txt")
    assert "triton" in cpu and "triton" not in gpu  # the CUDA torch pins its own (3.7.1 for 2.13.0)
    assert {name: v for name, v in cpu.items() if name != "triton"} == {
        name: v for name, v in gpu.items() if name in cpu
    }
    assert {"onnxruntime-gpu", "torch-tensorrt"} <= set(gpu)
    first, tensorrt = setup_commands()
    assert "-c constraints-gpu.txt" in first and "constraints.txt" not in first.replace("constraints-gpu.txt", "")
    # onnxruntime (the CPU wheel, in the onnx extra) beside onnxruntime-gpu: both install onnxruntime/
    assert "onnx," not in first and ",onnx" not in first and "onnxruntime-gpu[cuda,cudnn]" in first
    assert f"--extra-index-url {NVIDIA}" in tensorrt and "torch-tensorrt" in tensorrt


def answers(url: str) -> str | None:
    """Why ``url`` does not answer, or ``None`` where it does."""
    try:
        with urllib.request.urlopen(url, timeout=15):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} does not answer here ({getattr(exc, 'reason', exc)})"


def dry_run(command: str, tmp_path: Path) -> dict:
    """``command`` (a documented ``pip install``) resolved by pip's --dry-run against the registries
    as a fresh GPU machine sees them: nothing installed counts, no local wheels or caps."""
    args = shlex.split(command)
    assert args[:2] == ["pip", "install"]
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip.conf (local wheels, a torch cap) left out
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    argv += ["--report", str(report), "--index-url", PYPI, *args[2:]]
    try:
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=RESOLVE_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.skip(f"the registries did not answer the resolution within {RESOLVE_SECONDS} s")
    if done.returncode and re.search(r"(Network|Connection|Max retries|resolve host|timed out)", done.stderr):
        pytest.skip(f"a registry did not answer: {done.stderr.strip().splitlines()[-1][:200]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return {i["metadata"]["name"].lower(): i for i in json.loads(report.read_text())["install"]}


def test_the_documented_gpu_install_resolves_with_the_cuda_build_of_torch(tmp_path):
    if reason := answers(f"{PYPI}/torch/"):
        pytest.skip(reason)
    installs = dry_run(setup_commands()[0], tmp_path)
    torch = installs["torch"]
    assert torch["metadata"]["version"] == "2.13.0" and "+cpu" not in torch["download_info"]["url"]
    wanted = next(r for r in torch["metadata"]["requires_dist"] if r.startswith("triton"))
    assert installs["triton"]["metadata"]["version"] == re.search(r"==([\w.]+)", wanted).group(1)
    assert "onnxruntime-gpu" in installs and "onnxruntime" not in installs
    assert {"onnx", "onnxscript", "transformers", "pytest"} <= set(installs)


def test_the_documented_torch_tensorrt_install_resolves_with_nvidias_index(tmp_path):
    for url in (f"{PYPI}/torch-tensorrt/", f"{NVIDIA}/tensorrt-cu13-libs/"):
        if reason := answers(url):
            pytest.skip(f"{reason}: TensorRT's libraries come from NVIDIA's index")
    installs = dry_run(setup_commands()[1], tmp_path)
    assert installs["torch-tensorrt"]["metadata"]["version"] == "2.13.0"
    assert installs["torch"]["metadata"]["version"] == "2.13.0"
