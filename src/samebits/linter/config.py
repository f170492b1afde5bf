"""``[tool.samebits.lint]`` in pyproject.toml (the torch range a project declares: metadata.py)."""

from __future__ import annotations

import dataclasses
import fnmatch
import sys
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.files import read_regular
from samebits.linter.metadata import floor_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclasses.dataclass
class LintConfig:
    select: list[str] = dataclasses.field(default_factory=list)  # codes, names or prefixes; empty: all
    ignore: list[str] = dataclasses.field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    exclude: list[str] = dataclasses.field(default_factory=list)
    root: Path | None = None  # the folder of the pyproject.toml it came from

    def enabled(self, code: str, name: str, path: str) -> bool:
        if self.select and not any(_matches(s, code, name) for s in self.select):
            return False
        if any(_matches(s, code, name) for s in self.ignore):
            return False
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(path, pattern) and any(_matches(s, code, name) for s in codes):
                return False
        return True

    def excluded(self, relative: str) -> bool:
        return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(Path(relative).name, p) for p in self.exclude)


def _matches(selector: str, code: str, name: str) -> bool:
    selector = selector.strip()
    return code.startswith(selector.upper()) or selector.lower() == name


def find_pyproject(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path) -> LintConfig:
    """The config of the nearest pyproject.toml at or above ``start`` (defaults where there is none)."""
    path = find_pyproject(start)
    if path is None:
        return LintConfig()
    data = _read_toml(path)
    section: dict[str, Any] = data.get("tool", {}).get("samebits", {}).get("lint", {})
    known = {"select", "ignore", "per-file-ignores", "exclude", "torch"}
    unknown = sorted(set(section) - known)
    torch = section.get("torch")
    if torch is not None and (not isinstance(torch, str) or floor_of(f"torch{torch}") is None):
        raise UserError(f'{path}: [tool.samebits.lint] torch must be a version range such as ">=1.13", not {torch!r}')
    if unknown:
        raise UserError(
            f"{path}: unknown key(s) {', '.join(unknown)} in [tool.samebits.lint]; known: {', '.join(sorted(known))}"
        )
    return LintConfig(
        list(section.get("select", [])),
        list(section.get("ignore", [])),
        {k: list(v) for k, v in section.get("per-file-ignores", {}).items()},
        list(section.get("exclude", [])),
        path.parent,
    )


CONFIG_LIMIT = 4 << 20  # bytes: past any pyproject.toml


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_regular(path, CONFIG_LIMIT).decode())
    except OSError as exc:  # a FIFO, a folder, a file past the limit: one line, never a wait
        raise UserError(f"{path} cannot be read as a configuration file ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
