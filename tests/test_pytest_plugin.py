"""The samebits_golden fixture, run through pytester."""

import torch  # noqa: F401  pytester restores sys.modules after each in-process run: torch must be
# imported before the first one, since a C extension cannot be imported a second time

pytest_plugins = ["pytester"]

TEST_FILE = """
import pytest
import torch

def model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2).eval()

SHIFT = {shift}

@pytest.mark.parametrize("width", [1, 3])
def test_linear(samebits_golden, width):
    m = model()
    with torch.no_grad():
        m.bias += SHIFT
    samebits_golden.check(m, torch.ones(width, 4), name="out")
"""


def test_missing_golden_fails_with_a_hint_then_update_writes_it(pytester):
    pytester.makepyfile(test_model=TEST_FILE.format(shift=0.0))
    missing = pytester.runpytest()
    missing.assert_outcomes(failed=2)
    missing.stdout.fnmatch_lines(
        ["*no samebits golden*__goldens__*test_linear_1.out.safetensors; run `pytest --samebits-update` to write it*"]
    )
    pytester.runpytest("--samebits-update").assert_outcomes(passed=2)
    goldens = sorted(p.name for p in (pytester.path / "__goldens__").iterdir())
    assert goldens == ["test_linear_1.out.safetensors", "test_linear_3.out.safetensors"]
    passed = pytester.runpytest()
    passed.assert_outcomes(passed=2)
    passed.stdout.fnmatch_lines(["samebits: torch *, CPU *, * threads, hash randomisation *"])


def test_changed_outputs_fail_and_update_rewrites_only_those(pytester):
    pytester.makepyfile(test_model=TEST_FILE.format(shift=0.0))
    pytester.runpytest("--samebits-update").assert_outcomes(passed=2)
    folder = pytester.path / "__goldens__"
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    pytester.runpytest("--samebits-update").assert_outcomes(passed=2)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps  # no churn
    pytester.makepyfile(test_model=TEST_FILE.format(shift=0.01))
    failed = pytester.runpytest()
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(
        ["*outputs differ from the golden*", "*Mismatched elements:*", "*The failure occurred for item <output>*"]
    )
    pytester.runpytest("--samebits-update").assert_outcomes(passed=2)
    assert all(p.stat().st_mtime_ns != stamps[p.name] for p in folder.iterdir())
    pytester.runpytest().assert_outcomes(passed=2)


def test_tolerance_is_passed_through(pytester):
    pytester.makepyfile(
        test_tol="""
import torch

def test_tol(samebits_golden):
    samebits_golden.check(torch.nn.Identity(), torch.ones(2) * {value}, atol=0.1, rtol=0.0)
""".replace("{value}", "1.0")
    )
    pytester.runpytest("--samebits-update").assert_outcomes(passed=1)
    (pytester.path / "test_tol.py").write_text((pytester.path / "test_tol.py").read_text().replace("* 1.0", "* 1.05"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_header_line_only_when_a_test_uses_goldens(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    plain = pytester.runpytest()
    plain.assert_outcomes(passed=1)
    assert "samebits: torch" not in plain.stdout.str()


def test_concurrent_writers_never_leave_a_partial_file(pytester, tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from samebits.golden import record\n"
        "from samebits.errors import UserError\n"
        "try:\n"
        "    record(torch.nn.Linear(64, 64), sys.argv[1], torch.ones(256, 64))\n"
        "    print('wrote')\n"
        "except UserError:\n"
        "    print('exists')\n"
    )
    target = tmp_path / "same.safetensors"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    outcomes = sorted(p.communicate()[0].strip() for p in procs)
    assert outcomes.count("wrote") == 1 and outcomes.count("exists") == 2
    from samebits.golden import read_golden

    assert read_golden(target).header["kind"] == "golden"
    assert [p.name for p in tmp_path.iterdir()] == ["same.safetensors"]
