"""Rendering helpers shared by the subcommands: consoles and ``--json PATH`` (``-`` is stdout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from samebits.errors import UserError


def consoles(json_path: str | None) -> Console:
    """The console for the text report: stderr when the JSON goes to stdout."""
    return Console(stderr=json_path == "-", highlight=False)


def write_json(data: dict[str, Any], json_path: str | None) -> None:
    """Write a report's JSON to ``json_path`` (overwriting a previous report), or stdout for ``-``."""
    if json_path is None:
        return
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    if json_path == "-":
        print(text, end="")
        return
    path = Path(json_path)
    if path.is_dir():
        raise UserError(f"--json {json_path} is a directory; give a file path")
    from samebits.files import atomic_write

    try:
        atomic_write(path, lambda tmp: tmp.write_text(text))
    except OSError as exc:
        raise UserError(f"cannot write --json {json_path}: {exc.strerror}") from None
    wrote(path)


def wrote(path: Path) -> None:
    """Say on stderr where a file was written (stdout stays the report)."""
    print(f"samebits: wrote {path}", file=sys.stderr)


def check_html_path(html_path: str | None) -> None:
    """Refuse a bad ``--html`` before the work starts: a folder, or the plotting extra missing."""
    if html_path is None:
        return
    if Path(html_path).is_dir():
        raise UserError(f"--html {html_path} is a directory; give a file path")
    from samebits.report.charts import require_matplotlib

    require_matplotlib()


def write_html(data: dict[str, Any], html_path: str | None) -> None:
    """Write a report's self-contained HTML page to ``html_path``."""
    if html_path is None:
        return
    from samebits.files import atomic_write
    from samebits.report.html import render

    page = render(json.loads(json.dumps(data, default=str)))  # exactly what --json would hold
    try:
        atomic_write(Path(html_path), lambda tmp: tmp.write_text(page, encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write --html {html_path}: {exc.strerror}") from None
    wrote(Path(html_path))


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
