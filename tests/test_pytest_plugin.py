"""The samebits_golden fixture, run through pytester."""

import os

import pytest

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
    missing.stdout.fnmatch_lines(["*no samebits golden*__goldens__*test_linear_1.out.safetensors; run `pytest --samebits-update` to write it*"])
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
    failed.stdout.fnmatch_lines(["*outputs differ from the golden*", "*Mismatched elements:*", "*The failure occurred for item <output>*"])
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
