"""``samebits.lint()``: find Python files, parse them (never import or run them), run the checks."""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import stat
import tokenize
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from samebits.linter.checks import backends, environment, inference, safety, seeding
from samebits.linter.checks.common import FileContext, Finding, Fixer
from samebits.linter.cache import for_project as cache_for
from samebits.linter.config import LintConfig, load_config
from samebits.linter.metadata import torch_floor
from samebits.files import TooLarge, read_regular
from samebits.linter.project import MAX_FILES, Project, find_root, module_name
from samebits.rules import BY_CODE

CHECKS = (*environment.CHECKS, *backends.CHECKS, *seeding.CHECKS, *inference.CHECKS, *safety.CHECKS)
FIXERS: dict[str, Fixer] = {**environment.FIXES, **inference.FIXES, **safety.FIXES}  # registry: Rule.autofix
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    "env",
    ".env",
    "__pycache__",
    "node_modules",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "build",
    "dist",
    "site-packages",
    ".eggs",
    "__goldens__",
}
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z0-9_,\s-]+))?", re.I)

MAX_LINT_BYTES = 16 << 20  # a file to lint: larger is no Python source anyone wrote (checked before reading)


@dataclasses.dataclass
class LintResult:
    """Findings, plus the files that could not be read (each with why) and those skipped.
    It iterates, indexes and counts like the list of its findings."""

    findings: list[Finding]
    errors: list[tuple[str, str]]
    files: int
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)  # project files not indexed, each with why

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __getitem__(self, index: int) -> Finding:
        return self.findings[index]


def discover(
    paths: Iterable[str | os.PathLike[str]], config: LintConfig, limit: int | None = None
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Python files under ``paths`` (folders walked without VCS folders, venvs and caches; the walk
    stops past ``limit`` files), and the given files that were skipped (not Python, binary, missing)."""
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for folder, dirs, names in os.walk(path):
                if limit is not None and len(files) > limit:
                    break
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if d not in SKIP_DIRS
                    and not d.endswith(".egg-info")
                    and not (Path(folder, d) / "pyvenv.cfg").exists()
                )
                for name in sorted(names):
                    candidate = Path(folder, name)
                    if name.endswith((".py", ".pyi")) and not config.excluded(_relative(candidate, config)):
                        if _regular(candidate):
                            files.append(candidate)
                        else:
                            skipped.append((candidate.as_posix(), "not a regular file"))
        elif path.is_file():
            if path.suffix in (".py", ".pyi"):
                files.append(path)
            else:
                skipped.append((str(path), "not a Python file"))
        elif path.exists():
            skipped.append((str(path), "not a regular file"))  # a FIFO or a device: reading it could block
        else:
            skipped.append((str(path), "no such file or folder"))
    return files, skipped


def _regular(path: Path) -> bool:
    """A regular file (a link to one included): never a FIFO or a device, whose read can block."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def read_python(data: bytes) -> str:
    """Source bytes as Python reads them: a UTF-8 BOM dropped, a PEP 263 coding line honoured
    (``UnicodeDecodeError``/``SyntaxError`` where the bytes do not decode)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def _relative(path: Path, config: LintConfig) -> str:
    base = config.root or Path.cwd()
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _suppressed(line: str, code: str, name: str) -> bool:
    """``# noqa`` on the line: bare, or naming the rule's code, its name or the TorchFix code of
    the same check (``# noqa: TOR102`` for SB401: one comment for both tools)."""
    m = NOQA.search(line)
    if not m:
        return False
    codes = m.group("codes")
    if not codes:
        return True  # a bare noqa comment silences every rule on the line
    wanted = {c.strip() for c in re.split(r"[,\s]+", codes) if c.strip()}
    upper = {c.upper() for c in wanted}
    return code in upper or name in wanted or BY_CODE[code].torchfix in upper - {""}


def lint_source(
    source: str,
    display: str = "<string>",
    config: LintConfig | None = None,
    min_torch: tuple[int, int] | None = None,
    project: Project | None = None,
    module: str = "",
) -> list[Finding]:
    """Lint one piece of source (as module ``module`` of ``project``, else alone); raises
    ``SyntaxError`` when it does not parse."""
    config = config or LintConfig()
    tree = ast.parse(source, filename=display)
    ctx = FileContext(Path(display), display, source, tree, min_torch, project, module)
    lines = ctx.lines.text
    found: dict[tuple[int, int, str], Finding] = {}
    for code, check in CHECKS:
        if not config.enabled(code, BY_CODE[code].name, display):
            continue  # not selected: not run
        for f in check(ctx):
            line = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
            if not _suppressed(line, f.code, f.name):
                found.setdefault((f.line, f.col, f.code), f)
    for f in found.values():
        _plan_fix(ctx, f)
    return sorted(found.values(), key=lambda f: (f.line, f.col, f.code))


def _plan_fix(ctx: FileContext, finding: Finding) -> None:
    """Set the finding's ``fix`` (its rule's fixer, checks/*.py's ``FIXES``), or ``no_fix``: why not."""
    fixer = FIXERS.get(finding.code)
    if fixer is None or finding.node is None:
        finding.no_fix = BY_CODE[finding.code].no_autofix or "this rule has no automatic fix"
        finding.node = None
        return
    try:
        planned = fixer(ctx, finding.node)
    except Exception as exc:  # a bug in one fixer: the finding stands, without a fix
        planned = f"samebits could not work out a fix ({type(exc).__name__}: {exc}); please report it"
    if isinstance(planned, str):
        finding.no_fix = planned
    else:
        finding.fix = planned
    finding.node = None  # the fix is planned: the finding need not hold on to the tree


@dataclasses.dataclass
class LintedFile:
    """One file as it was linted: its bytes and text, where it sits in its project, its findings
    (what ``--fix`` starts from)."""

    path: Path
    display: str
    data: bytes
    source: str
    min_torch: tuple[int, int] | None
    project: Project
    module: str
    findings: list[Finding]

    def relint(self, source: str, config: LintConfig) -> list[Finding]:
        """``source`` linted in this file's place (``SyntaxError`` where it does not parse)."""
        return lint_source(source, self.display, config, self.min_torch, self.project, self.module)


def lint(
    paths: Iterable[str | os.PathLike[str]],
    config: LintConfig | None = None,
    on_file: Callable[[LintedFile], None] | None = None,
) -> LintResult:
    """Lint every Python file under ``paths`` (``on_file`` is called with each file linted).
    Nothing is imported or run."""
    given = [Path(p) for p in paths]
    start = given[0] if given and given[0].is_dir() else (given[0].parent if given else Path.cwd())
    config = config or load_config(start.resolve())
    files, skipped = discover(given, config)
    findings: list[Finding] = []
    errors: list[tuple[str, str]] = []
    linted = 0
    projects = Projects(given)
    for path in files:
        display = path.as_posix()
        try:
            data = read_regular(path, MAX_LINT_BYTES)
            if b"\x00" in data[:4096]:
                skipped.append((display, "binary file"))
                continue
            linted += 1
            project, module = projects.of(path)
            linted_file = LintedFile(
                path, display, data, read_python(data), torch_floor(path.parent), project, module, []
            )
            linted_file.findings = linted_file.relint(linted_file.source, config)
            findings += linted_file.findings
            if on_file is not None:
                on_file(linted_file)
        except (UnicodeDecodeError, LookupError):
            errors.append((display, "not text in the encoding it declares (UTF-8 unless a coding line says otherwise)"))
        except SyntaxError as exc:
            errors.append((display, f"cannot parse: {exc.msg}" + (f" (line {exc.lineno})" if exc.lineno else "")))
        except TooLarge as exc:
            skipped.append((display, f"not linted: {exc.strerror} (no Python source is that large)"))
        except OSError as exc:
            errors.append((display, f"cannot read: {exc.strerror}"))
        except RecursionError:
            errors.append((display, "too deeply nested to parse or check (an expression of thousands of terms)"))
        except MemoryError:
            errors.append((display, "too large to parse in the memory left"))
        except Exception as exc:  # a bug in one check: the other files are still linted and reported
            errors.append((display, f"samebits could not lint it ({type(exc).__name__}: {exc}); please report it"))
    return LintResult(findings, errors, linted, skipped, projects.notes())


class Projects:
    """The project index of each linted file's project (linter/project.py), built once per root."""

    def __init__(self, given: list[Path]) -> None:
        self.given = given
        self.built: dict[Path, Project] = {}

    def of(self, path: Path) -> tuple[Project, str]:
        """The project of ``path``: its nearest folder with a project marker, else the folder
        given that holds it, else the files given beside it."""
        found = find_root(path) or next((g for g in self.given if g.is_dir() and g in path.parents), None)
        root = (found or path.parent).resolve()
        if root not in self.built:
            if found is None:
                files = [g for g in self.given if g.is_file() and g.parent == path.parent]
            else:
                files = discover([found], LintConfig(), limit=MAX_FILES)[0]
            self.built[root] = Project.build(root, files, cache_for(root))
        return self.built[root], module_name(path, root)

    def notes(self) -> list[str]:
        return [n for p in self.built.values() for n in p.notes]
