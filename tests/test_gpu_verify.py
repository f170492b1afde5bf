"""bench/gpu_verify.py, the one prepared GPU run: here (no CUDA) it completes in seconds with every
row skipped, in its documented order and table format; its children are capped and read by their
marked line; and its checks run on the CPU (GPU_VERIFY_DEVICE=cpu) without a slip, so the first
GPU run does not spend its minutes on a typo."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "gpu_verify.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_verify_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gpu_verify = load_script()


def without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPU_VERIFY_DEVICE")}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the run would take minutes")
def test_gpu_verify_completes_without_cuda_in_seconds_with_every_row_skipped_in_order(tmp_path):
    out = tmp_path / "rows.json"
    started = time.monotonic()
    done = subprocess.run(  # no PYTHONPATH: the script finds this checkout's src itself
        [sys.executable, str(SCRIPT), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env=without_pythonpath(),
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gpu_verify on no CUDA device, torch ")
    assert lines[2] == "claim | expected | observed | verdict | s" and lines[3] == "--- | --- | --- | --- | ---"
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(lines) - 4
    assert all(r["verdict"] == "skipped: no CUDA" for r in rows)
    claims = [r["claim"] for r in rows]
    # the kernel rows first, the determinism rows next, the backends last (one row each)
    assert claims == [claim for check in gpu_verify.CHECKS for claim, _ in gpu_verify.CLAIMS[check.name]]
    assert claims[0].startswith("batch_invariant() on CUDA: a decoder block on the fixed-order kernels")
    kernels = max(i for i, c in enumerate(claims) if c.startswith(("kernels:", "batch_invariant()", "fixed-order")))
    backends = [i for i, c in enumerate(claims) if "built once" in c]
    assert len(backends) == 3 and kernels < min(backends) and backends == list(range(len(claims) - 3, len(claims)))
    assert all(r["expected"] for r in rows)  # a skipped row still says what a GPU run must show


def test_bad_arguments_are_one_line_and_exit_2():
    done = subprocess.run([sys.executable, str(SCRIPT), "--budget", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--budget must be a positive number of seconds" in done.stderr


def test_a_childs_result_is_its_marked_line_never_a_warning_after_it():
    output = f'{gpu_verify.MARK}{{"digest": "abc"}}\nUserWarning: something printed last\n'
    assert gpu_verify.marked(output) == {"digest": "abc"}
    assert gpu_verify.marked("UserWarning: no result\n") is None


def test_a_check_past_its_cap_is_killed_with_its_children():
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    rc, out = gpu_verify.run_child([sys.executable, "-c", code], timeout=3)
    assert rc is None and "started" in out and time.monotonic() - started < 20


# The checks themselves on the CPU: the verdicts mean nothing here (the CPU takes the tiles, not
# the Triton kernels), but every row must come from the check's own logic, not from an exception
# or a child that failed to start.
CPU_CHECKS = ["kernels-edges", "transformers", "determinism", "fresh-processes", "record-verify", "predictor"]


@pytest.mark.parametrize("check", CPU_CHECKS)
def test_the_checks_run_on_the_cpu_without_a_slip(check):
    if check == "transformers":
        pytest.importorskip("transformers")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", check],
        capture_output=True,
        text=True,
        timeout=300,
        env={**without_pythonpath(), "GPU_VERIFY_DEVICE": "cpu"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = gpu_verify.marked(done.stdout)
    assert [r["claim"] for r in rows] == [claim for claim, _ in gpu_verify.CLAIMS[check]]
    for r in rows:
        assert not r["observed"].startswith(("exit ", "ran out of time")), r
        assert "Error:" not in r["observed"].split(";")[0], r
