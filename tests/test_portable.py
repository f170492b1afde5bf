"""``samebits run --portable LEVEL``: MKL, oneDNN and ATen pinned to one baseline's code paths
before the process starts (the first part of the portable profile, issue #27)."""

from __future__ import annotations

import sys

import pytest
import torch

from samebits.determinism.portable import LEVELS, level, level_of
from samebits.errors import UserError

from conftest import run_cli

DIGEST = (
    "import torch, samebits\n"
    "from samebits.models.target import as_loaded, inputs_for\n"
    "l = as_loaded('demo:mlp'); x = inputs_for(l, None)\n"
    "with torch.inference_mode():\n"
    "    print(torch.backends.cpu.get_cpu_capability(), samebits.digest(x.call(l.model.eval()))[:16])\n"
)


def digest(*run_args: str, env: dict[str, str] | None = None) -> str:
    from conftest import scrubbed_env

    command = ("--", sys.executable, "-c", DIGEST)  # this interpreter, whatever PATH finds first
    result = run_cli("run", *run_args, *command, env=scrubbed_env(**(env or {})), timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-2] + " " + result.stdout.split()[-1]


def test_a_level_sets_its_variables_before_start_and_the_libraries_take_its_paths():
    pinned = digest("--portable", "x86-64-v3")
    assert pinned.startswith("AVX2 ")  # ATen's dispatch capped
    assert pinned == digest(env=LEVELS["x86-64-v3"].env)  # the same as the variables exported by hand
    native = digest()  # natively, ATen's own best capability; whether that changes bits is the CPU's
    assert native.split()[0] == torch.backends.cpu.get_cpu_capability()
    assert digest("--portable", "native") == native


def test_levels_are_refused_in_one_line_when_unknown_or_not_runnable_here():
    result = run_cli("run", "--portable", "avx9", "--", "true")
    assert result.returncode == 2 and result.stderr.strip() == (
        "samebits: error: unknown portable level 'avx9'; choose x86-64-v3, x86-64-v2, native"
    )
    with pytest.raises(UserError, match="this CPU cannot run portable level x86-64-v3: it lacks avx2, fma"):
        level("x86-64-v3", {"sse4_2", "avx"})
    assert level("x86-64-v2", {"sse4_2"}).env["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert level_of({**LEVELS["x86-64-v3"].env, "OTHER": "1"}) == "x86-64-v3" and level_of({}) is None
