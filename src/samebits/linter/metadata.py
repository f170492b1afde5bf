"""The lowest torch a file's project supports, from its metadata (read as data, never run).

For each file, folders are searched upward to the repository root (the nearest folder holding
``.git``): an explicit ``[tool.samebits.lint] torch = ">=1.13"`` anywhere on that path wins;
otherwise the nearest folder with a torch requirement decides, its ``pyproject.toml`` first, then
``requirements*.txt``, ``setup.cfg`` and ``setup.py`` (string literals only). Only a ``torch``
requirement counts: ``torchvision``, ``torchaudio`` and ``torch-geometric`` say nothing about it.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path
from typing import Any

from samebits.files import read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Version = tuple[int, int]
_TORCH = re.compile(r"^\s*torch(?![\w.-])\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#@]*)", re.I)
_BOUND = re.compile(r"(>=|==|~=|>|===)\s*v?(\d+)\.(\d+)")


def floor_of(requirement: str) -> Version | None:
    """``(1, 13)`` for ``torch>=1.13,<3``; ``(0, 0)`` for a bare ``torch``; None when the line is
    not a torch requirement."""
    m = _TORCH.match(requirement.strip().strip("\"'"))
    if not m:
        return None
    bounds = [(int(a), int(b)) for _, a, b in _BOUND.findall(m.group("spec"))]
    return min(bounds) if bounds else (0, 0)


def _lowest(lines: list[str]) -> Version | None:
    found = [v for v in (floor_of(line) for line in lines) if v is not None]
    return min(found) if found else None


METADATA_LIMIT = 1 << 20  # bytes read of one metadata file: more is no requirements file


def _text(path: Path) -> str:
    """A metadata file's text; ``""`` for anything that is not a regular file of at most
    :data:`METADATA_LIMIT` bytes (a folder named ``requirements-dev.txt``, a FIFO, a link to
    ``/dev/zero``): such a file declares nothing, and never costs a finding elsewhere."""
    try:
        return read_regular(path, METADATA_LIMIT).decode(errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=256)
def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError:
        return {}  # a broken pyproject says nothing here; `samebits lint`'s config reports it


def explicit(pyproject: Path) -> Version | None:
    """``[tool.samebits.lint] torch = ">=1.13"`` of ``pyproject``, if set."""
    value = _toml(pyproject).get("tool", {}).get("samebits", {}).get("lint", {}).get("torch")
    return floor_of(f"torch{value}") if isinstance(value, str) else None


@functools.lru_cache(maxsize=1024)
def declared(folder: Path) -> Version | None:
    """The torch floor this folder's own metadata declares, pyproject.toml first."""
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        project = _toml(pyproject).get("project", {})
        lines = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            lines += list(extra)
        found = _lowest([line for line in lines if isinstance(line, str)])
        if found is not None:
            return found
    lines = []
    for req in sorted(folder.glob("requirements*.txt")):
        lines += _text(req).splitlines()
    lines += _text(folder / "setup.cfg").splitlines()
    lines += _string_literals(folder / "setup.py")
    return _lowest(lines)


def _string_literals(path: Path) -> list[str]:
    try:
        tree = ast.parse(_text(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _folders(start: Path) -> list[Path]:
    """``start`` and its parents up to the repository root (the nearest folder with ``.git``)."""
    out = []
    for folder in [start, *start.parents]:
        out.append(folder)
        if (folder / ".git").exists():
            break
    return out


@functools.lru_cache(maxsize=1024)
def torch_floor(folder: Path) -> Version | None:
    """The lowest torch supported by the project that ``folder`` belongs to (see the module doc)."""
    folders = _folders(folder.resolve())
    for f in folders:
        pyproject = f / "pyproject.toml"
        if pyproject.is_file() and (found := explicit(pyproject)) is not None:
            return found
    for f in folders:
        if (found := declared(f)) is not None:
            return found
    return None
