"""Shared pieces of the contract tests (tests/test_contract_*.py, one file per class of the
contract: code execution, deletion, waits, exit codes, serving isolation, answers and leaks).
Every CLI case asserts the exit code, one line on stderr without a traceback, and that nothing
on disk changed that samebits was not asked to write."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from conftest import rewrite_golden

MODELS = Path(__file__).with_name("reliability_models.py")


def m(name: str) -> str:
    return f"{MODELS}:{name}"


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


PROGRESS = re.compile(r"^samebits: (checking|generating|doctor|bench)[: ]")  # cli/progress.py, off a terminal


def one_error(result: subprocess.CompletedProcess[str], fragment: str, code: int = 2) -> None:
    """Exit ``code`` and one line on stderr (besides progress lines) that holds ``fragment``."""
    lines = [line for line in result.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and fragment in lines[0], lines[0]


class Evil:
    """Unpickling this creates a marker file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def rewrite(src: Path, dst: Path, edit_header=None, edit_tensors=None) -> Path:
    return rewrite_golden(src, dst, edit_header=edit_header, edit_tensors=edit_tensors)
