"""The docs stay true: every code block in README.md and docs/*.md marked runnable (```python
runnable, ```bash runnable) runs here as written. A bash block runs line by line (a trailing
``\\`` continues a line); ``# exit N`` at the end of a line is the exit code it must give
(default 0). No block may install anything."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import scrubbed_env

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w+) runnable\s*\n(.*?)^```\s*$", re.S | re.M)
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def runnable_blocks() -> list[tuple[str, str, str]]:
    """``(where, language, code)`` of every block marked runnable."""
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            line = text[: m.start()].count("\n") + 1
            out.append((f"{page.relative_to(REPO)}:{line}", m.group(1), m.group(2)))
    return out


BLOCKS = runnable_blocks()


def commands(code: str) -> list[tuple[str, int]]:
    """A bash block's commands with the exit code each must give."""
    out, pending = [], ""
    for raw in code.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line.startswith("#"):
            continue
        expected = re.search(r"#\s*exit (\d+)\s*$", line)
        out.append((line, int(expected.group(1)) if expected else 0))
    return out


def test_the_docs_have_runnable_blocks_and_none_installs():
    where = {w.split(":")[0] for w, _, _ in BLOCKS}
    assert {"README.md", "docs/predictor.md", "docs/doctor.md"} <= where, where
    for w, _, code in BLOCKS:
        assert not re.search(r"\bpip install\b|\bvenv\b", code), f"{w} installs: the doc test cannot run it"


@pytest.mark.parametrize("where,language,code", BLOCKS, ids=[w for w, _, _ in BLOCKS])
def test_a_runnable_block_runs_as_written(where, language, code, tmp_path):
    env = scrubbed_env(SAMEBITS_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="80")
    bin_dir = str(Path(sys.executable).parent)  # the venv's samebits and python first
    env["PATH"] = bin_dir + ":" + env.get("PATH", "")
    if language == "python":
        script = tmp_path / "block.py"
        script.write_text(code)
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{where}:\n{result.stdout}\n{result.stderr}"
        return
    assert language in ("bash", "sh"), f"{where}: a runnable block is python or bash"
    for command, expected in commands(code):
        result = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == expected, f"{where}: {command}\n{result.stdout}\n{result.stderr}"
