"""Rendering helpers shared by the subcommands: consoles and ``--json PATH`` (``-`` is stdout)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from samebits.errors import UserError


def consoles(json_path: str | None) -> Console:
    """The console for the text report: stderr when the JSON goes to stdout."""
    return Console(stderr=json_path == "-", highlight=False)


def write_json(data: dict[str, Any], json_path: str | None, inputs: tuple[str, ...] = ()) -> None:
    """Write a report's JSON to ``json_path`` (over an earlier samebits report only, never over
    one of the command's ``inputs``), or stdout for ``-``."""
    if json_path is None:
        return
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    if json_path == "-":
        print(text, end="")
        return
    path = Path(json_path)
    if path.is_dir():
        raise UserError(f"--json {json_path} is a directory; give a file path")
    replaceable(path, "--json", is_json_report, inputs)
    from samebits.files import atomic_write

    try:
        atomic_write(path, lambda tmp: tmp.write_text(text))
    except OSError as exc:
        raise UserError(f"cannot write --json {json_path}: {exc.strerror}") from None
    wrote(path)


def wrote(path: Path) -> None:
    """Say on stderr where a file was written (stdout stays the report)."""
    print(f"samebits: wrote {path}", file=sys.stderr)


def check_report_paths(json_path: str | None, html_path: str | None, inputs: tuple[str, ...] = ()) -> None:
    """Refuse bad ``--json`` and ``--html`` paths before the work starts: a folder, a file
    samebits did not write (or one of the command's ``inputs``), the plotting extra missing."""
    if json_path not in (None, "-"):
        replaceable(Path(json_path), "--json", is_json_report, inputs)
    if html_path is None:
        return
    if Path(html_path).is_dir():
        raise UserError(f"--html {html_path} is a directory; give a file path")
    replaceable(Path(html_path), "--html", is_html_report, inputs)
    from samebits.report.charts import require_matplotlib

    require_matplotlib()


def write_html(data: dict[str, Any], html_path: str | None, inputs: tuple[str, ...] = ()) -> None:
    """Write a report's self-contained HTML page to ``html_path``."""
    if html_path is None:
        return
    from samebits.files import atomic_write
    from samebits.report.html import render

    page = render(json.loads(json.dumps(data, default=str)))  # exactly what --json would hold
    replaceable(Path(html_path), "--html", is_html_report, inputs)
    try:
        atomic_write(Path(html_path), lambda tmp: tmp.write_text(page, encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write --html {html_path}: {exc.strerror}") from None
    wrote(Path(html_path))


REPORT_LIMIT = 256 << 20  # bytes read of an existing file to tell whether it is a samebits report


def replaceable(path: Path, flag: str, ours: Callable[[bytes], bool], inputs: tuple[str, ...] = ()) -> None:
    """Refuse in one line to write ``path`` where it holds what samebits did not write: only a
    missing or empty file, a link (replaced, its target untouched) or an earlier report of this
    kind (``ours`` of its bytes) may be replaced, and never one of the command's ``inputs`` (a
    golden, the report being rendered, a fingerprint being compared)."""
    from samebits.files import read_regular

    try:
        st = path.lstat()
    except OSError:
        return  # nothing there
    if any(_same_file(path, Path(i)) for i in inputs):
        raise UserError(f"{flag} {path} is one of this command's inputs; give another path")
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return  # a link is replaced, never written through; an empty file holds nothing
    try:
        data = read_regular(path, REPORT_LIMIT)
    except OSError:
        data = b""
    if not ours(data):
        raise UserError(
            f"{flag} {path} exists and is not a samebits report; samebits overwrites only its own reports: "
            "remove it or give another path"
        )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def is_json_report(data: bytes) -> bool:
    """A samebits JSON report: an object with a ``kind`` and a ``schema_version``."""
    from samebits.files import BadJson, parse_json

    try:
        report = parse_json(data)
    except BadJson:
        return False
    return isinstance(report, dict) and isinstance(report.get("kind"), str) and "schema_version" in report


def is_html_report(data: bytes) -> bool:
    """A page ``samebits.report.html.render`` wrote."""
    return data.startswith(b"<!DOCTYPE html>") and b"<title>samebits " in data[:4096]


def is_lint_output(data: bytes) -> bool:
    """``samebits lint``'s report in any format: JSON, SARIF naming samebits, or text ending in
    its summary line (``3 findings in 2 files``)."""
    if is_json_report(data):
        return True
    from samebits.files import BadJson, parse_json

    try:
        sarif = parse_json(data)
        return bool(sarif["runs"][0]["tool"]["driver"]["name"] == "samebits")
    except (BadJson, KeyError, IndexError, TypeError):
        pass
    last = data.decode(errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
    return re.fullmatch(r"\d+ findings? in \d+ files?(; .*)?", last) is not None


SHORT_TEXT = 12  # a text column no wider than this is kept whole (axis names, verdicts)


def fitted_table(
    headers: list[str],
    rows: list[list[str]],
    numeric: set[int],
    width: int,
    names: frozenset[int] = frozenset(),
    **options: Any,
) -> Table:
    """A table that fits ``width`` columns by wrapping its text columns, never by cutting a
    number: each column in ``numeric`` is as wide as its widest cell (its header wraps between
    words), and the text columns share what is left (cells may hold rich markup). A column in
    ``names`` holds dotted names (``encoder.layer.0.attention``), broken after a dot, not mid-word."""
    options = {"box": None, **options}
    pad = options.get("padding", (0, 1))
    gap = 2 * (pad[1] if isinstance(pad, tuple) and len(pad) > 1 else 1)
    cells = {i: [Text.from_markup(r[i]) for r in rows] for i in range(len(headers))}
    widths = {i: max([t.cell_len for t in cells[i]] + [max(map(len, headers[i].split()))]) for i in numeric}
    longest = {i: max([t.cell_len for t in cells[i]] + [len(headers[i])]) for i in range(len(headers))}
    short = {i for i in range(len(headers)) if i not in numeric and longest[i] <= SHORT_TEXT}  # kept whole
    text = [i for i in range(len(headers)) if i not in numeric and i not in short]
    left = width - sum(widths.values()) - sum(longest[i] for i in short) - gap * len(headers)
    share = max(8, left // max(1, len(text)))
    for i in names & set(text):
        if longest[i] > share:
            rows = [[*r[:i], break_after_dots(r[i], share), *r[i + 1 :]] for r in rows]
    columns = []
    for i, header in enumerate(headers):
        if i in numeric:
            columns.append(Column(header, justify="right", width=widths[i]))
        elif i in short:
            columns.append(Column(header, width=longest[i]))
        else:
            columns.append(Column(header, overflow="fold", max_width=share if longest[i] > share else None))
    table = Table(*columns, **options)
    for row in rows:
        table.add_row(*row)
    return table


def break_after_dots(name: str, width: int) -> str:
    """``name`` in lines of at most ``width`` characters, each ending after a dot (a part longer
    than ``width`` is left for the table to fold)."""
    lines, line = [], ""
    for part in name.replace(".", ".\0").split("\0"):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])
