"""The contract for lint's own files and output: its project cache is a cache (a FIFO, a damaged,
wrong-typed or huge cache file is ignored and written anew, never a hang or lost findings), files
are size-checked before they are read, and file names never reach a terminal or a SARIF log raw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.linter import lint
from samebits.linter.cache import for_project
from samebits.linter.config import LintConfig

from conftest import scrubbed_env

SOURCE = 'import torch\nmodel = torch.load("m.pt")\nx = model(1)\n'  # SB301 at 3:5


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "infer.py").write_text(SOURCE)
    return root


def lint_codes(root: Path) -> list[str]:
    return [f.code for f in lint([str(root)], LintConfig()).findings]


@pytest.mark.parametrize(
    "damage",
    ["not json {", '{"schema": 1, "files": []}', "wrong-typed", "deep", "fifo", "huge"],
)
def test_a_damaged_project_cache_is_ignored_and_written_anew(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("SAMEBITS_LINT_CACHE_DIR", str(tmp_path / "cache"))
    root = project(tmp_path)
    want = lint_codes(root)
    assert want == ["SB301"]
    cache = for_project(root).path
    assert cache.is_file()
    if damage == "wrong-typed":  # every summary replaced by a value of another type, checks kept
        data = json.loads(cache.read_text())
        data["files"] = {k: {**v, "summary": ["not", "a", "summary"]} for k, v in data["files"].items()}
        cache.write_text(json.dumps(data))
    elif damage == "deep":
        cache.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "fifo":
        cache.unlink()
        os.mkfifo(cache)
    elif damage == "huge":
        with open(cache, "wb") as f:
            f.truncate(4 << 30)  # sparse: 4 GiB that read() would try to hold
    else:
        cache.write_text(damage)
    from samebits.linter import cache as cache_module

    cache_module._MEMORY.clear()  # as a fresh process: the summaries come from the file or a parse
    result = subprocess.run(  # a fresh process, bounded: a FIFO must not block it
        [sys.executable, "-m", "samebits", "lint", str(root)],
        capture_output=True,
        text=True,
        env=scrubbed_env(SAMEBITS_LINT_CACHE_DIR=str(tmp_path / "cache")),
        timeout=60,
    )
    assert result.returncode == 1 and "SB301" in result.stdout, result.stdout + result.stderr
    if damage != "fifo":  # a FIFO is no file to replace; the others are written anew, readable
        assert json.loads(cache.read_text())["files"]


def test_a_file_too_large_to_be_source_is_skipped_before_it_is_read(tmp_path):
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(4 << 30)
    (tmp_path / "ok.py").write_text(SOURCE)
    result = lint([str(tmp_path)], LintConfig())
    assert [f.code for f in result.findings] == ["SB301"]
    assert [(Path(p).name, why) for p, why in result.skipped] == [
        ("big.py", "not linted: over 16,777,216 bytes (no Python source is that large)")
    ]


NAMES = ["\x1b[31mred.py", "two\nlines.py", "sp ace#%.py", os.fsdecode(b"bad\xff.py")]


def test_file_names_are_escaped_in_text_and_percent_encoded_in_sarif(tmp_path):
    for name in NAMES:
        (tmp_path / name).write_text(SOURCE)
    text = subprocess.run(
        [sys.executable, "-m", "samebits", "lint", "."],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=scrubbed_env(),
    ).stdout
    lines = text.strip().splitlines()
    assert len(lines) == len(NAMES) + 1 and "\x1b" not in text  # one line per finding, no escape reaches the terminal
    assert {line.split(":")[0] for line in lines[:-1]} == {
        "\\x1b[31mred.py",
        "two\\nlines.py",
        "sp ace#%.py",
        "bad\\udcff.py",
    }
    sarif = subprocess.run(
        [sys.executable, "-m", "samebits", "lint", ".", "--format", "sarif"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=scrubbed_env(),
    ).stdout
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in json.loads(sarif)["runs"][0]["results"]
    }
    assert uris == {"%1B%5B31mred.py", "two%0Alines.py", "sp%20ace%23%25.py", "bad%FF.py"}
