"""``samebits lint --fix`` and ``--diff``: each finding's fix (its rule's, checks/*.py) applied one
at a time, each kept only where the file still parses and, linted again in its project, has lost
that finding and gained none; the file then written atomically in its own encoding, line endings,
BOM and permissions, never through a link, or shown as a unified diff."""

from __future__ import annotations

import dataclasses
import difflib
import io
import os
import re
import stat
import tokenize
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from samebits.files import WriteError, atomic_write, read_regular
from samebits.linter.checks.common import Finding
from samebits.linter.checks.edits import apply
from samebits.linter.config import LintConfig
from samebits.linter.engine import MAX_LINT_BYTES, LintedFile, LintResult, lint, read_python
from samebits.rules import BY_CODE

Key = tuple[str, str]  # a finding as edits elsewhere in its file leave it: code, message without numbers


@dataclasses.dataclass
class FileFix:
    """What ``--fix`` did to one file: the findings fixed (each with what was done) and those
    whose fix did not hold (each with why), at their lines before the fix; and the file's new text
    (``None``: unchanged)."""

    path: Path
    display: str
    before: str
    fixed: list[tuple[Finding, str]] = dataclasses.field(default_factory=list)
    not_fixed: list[tuple[Finding, str]] = dataclasses.field(default_factory=list)
    after: str | None = None

    def diff(self) -> str:
        """The change as a unified diff (``a/``, ``b/`` paths, as ``git apply`` reads them)."""
        if self.after is None:
            return ""
        name = self.display.lstrip("/")
        lines = difflib.unified_diff(_lines(self.before), _lines(self.after), f"a/{name}", f"b/{name}")
        return "".join(
            line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines
        )


@dataclasses.dataclass
class FixResult:
    """Every changed or attempted file's :class:`FileFix`; the findings of fixable rules that have
    no fix, each with why (lines as before the fix); and the lint of the files as they are
    afterwards (for ``--diff``, which writes nothing, as they are)."""

    files: list[FileFix]
    unfixable: list[tuple[Finding, str]]
    remaining: LintResult

    @property
    def fixed(self) -> list[tuple[Finding, str]]:
        return [item for f in self.files for item in f.fixed]

    @property
    def not_fixed(self) -> list[tuple[Finding, str]]:
        found = [item for f in self.files for item in f.not_fixed] + self.unfixable
        return sorted(found, key=lambda item: (item[0].path, item[0].line, item[0].col, item[0].code))


def fix(paths: Iterable[str | os.PathLike[str]], config: LintConfig, write: bool = True) -> FixResult:
    """Fix what can be fixed in the Python files under ``paths`` (only those: never a project file
    outside them), writing each changed file where ``write``; then lint again."""
    targets = list(paths)
    files: list[FileFix] = []
    unfixable: list[tuple[Finding, str]] = []

    def visit(linted: LintedFile) -> None:
        unfixable.extend((f, f.no_fix) for f in linted.findings if f.fix is None and BY_CODE[f.code].autofix)
        if any(f.fix is not None for f in linted.findings):
            files.append(fix_file(linted, config, write))

    first = lint(targets, config, on_file=visit)
    changed = write and any(f.after is not None for f in files)
    return FixResult(files, unfixable, lint(targets, config) if changed else first)


def _key(finding: Finding) -> Key:
    return finding.code, re.sub(r"\d+", "#", finding.message)  # line numbers move with the edits


def fix_file(linted: LintedFile, config: LintConfig, write: bool) -> FileFix:
    """Apply ``linted``'s fixes one at a time (see the module docstring), then write the file."""
    result = FileFix(linted.path, linted.display, linted.source)
    refused = _unwritable(linted.path)
    if refused:
        result.not_fixed = [(f, refused) for f in linted.findings if f.fix is not None]
        return result
    text = _apply_each(linted, config, result)
    if text == linted.source:
        return result
    try:
        data = _encode(linted, text)
        if write:
            _write(linted, data)
        result.after = text
    except (OSError, ValueError, UnicodeError, WriteError) as exc:
        why = f"not written: {getattr(exc, 'strerror', None) or exc}"
        result.not_fixed += [(f, why) for f, _ in result.fixed]
        result.fixed = []
    return result


def _apply_each(linted: LintedFile, config: LintConfig, result: FileFix) -> str:
    """The file's text with every fix that holds applied, first to last as they come."""
    text, findings = linted.source, linted.findings
    origin = _Origin(linted)
    tried: set[tuple[Key, int]] = set()
    while True:
        pending = ((f, origin.of(f, text)) for f in findings if f.fix is not None)
        candidate, shown = next(((f, o) for f, o in pending if (_key(f), o.line) not in tried), (None, None))
        if candidate is None or shown is None or candidate.fix is None:
            return text
        tried.add((_key(candidate), shown.line))
        try:
            new = apply(text, candidate.fix.edits)
            after = linted.relint(new, config)
        except SyntaxError as exc:
            result.not_fixed.append((shown, f"the fixed file would not parse ({exc.msg}, line {exc.lineno})"))
            continue
        except Exception as exc:  # a bug in one fix: it is left out, the others go on
            why = f"samebits could not apply the fix ({type(exc).__name__}: {exc}); please report it"
            result.not_fixed.append((shown, why))
            continue
        why = _worse(findings, after, candidate)
        if why:
            result.not_fixed.append((shown, why))
            continue
        result.fixed.append((shown, candidate.fix.title))
        text, findings = new, after


class _Origin:
    """A finding of the file as fixed so far, at its line in the file as it was linted."""

    def __init__(self, linted: LintedFile) -> None:
        self.linted = linted
        self.before = _lines(linted.source)
        self.text = linted.source
        self.map: dict[int, int] = {}

    def of(self, finding: Finding, text: str) -> Finding:
        if text == self.linted.source:
            return finding
        if text != self.text:
            self.text, self.map = text, {}
            matcher = difflib.SequenceMatcher(None, self.before, _lines(text), autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                for j in range(j1, j2):  # an inserted or replaced line: the first line it replaced
                    self.map[j + 1] = (i1 + (j - j1) if tag == "equal" else i1) + 1
        line = self.map.get(finding.line, finding.line)
        same = (f for f in self.linted.findings if f.line == line and _key(f) == _key(finding))
        return next(same, dataclasses.replace(finding, line=line))


def _worse(before: list[Finding], after: list[Finding], fixed: Finding) -> str:
    """Why the findings ``after`` a fix are no improvement ("" where they are): a finding gained,
    or the fixed one still there."""
    old, new = Counter(map(_key, before)), Counter(map(_key, after))
    gained = new - old
    if gained:
        code, message = next(iter(gained))
        return f"the fix would add a finding ({code}: {message})"
    if new[_key(fixed)] >= old[_key(fixed)]:
        return "the fix would not remove the finding (another path still reaches it)"
    return ""


def _unwritable(path: Path) -> str:
    """Why ``path`` is not rewritten ("" where it may be): a link (its target may be anywhere),
    a file with other hard links (a new file would split them), not a regular file."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link: samebits does not write through links (fix the file it points to)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return f"the file has {st.st_nlink} hard links: writing it anew would split them"
    return ""


def _encode(linted: LintedFile, text: str) -> bytes:
    """``text`` in the file's own encoding (its BOM kept), checked to read back as ``text``."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(linted.data).readline)
    data = text.encode(encoding)
    if read_python(data) != text:
        raise ValueError("the fixed text does not read back the same")
    return data


def _write(linted: LintedFile, data: bytes) -> None:
    """Replace the file atomically with ``data``, with its permissions, where it still holds the
    bytes that were linted."""
    mode = stat.S_IMODE(os.stat(linted.path).st_mode)
    if read_regular(linted.path, MAX_LINT_BYTES) != linted.data:
        raise ValueError("the file changed while it was being fixed")
    atomic_write(linted.path, lambda tmp: tmp.write_bytes(data), mode=mode)


def _lines(text: str) -> list[str]:
    """``text``'s lines with their endings (``\\r\\n``, ``\\r``, ``\\n``), as Python counts them."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
