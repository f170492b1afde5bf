"""Rendering helpers shared by the subcommands: consoles and ``--json PATH`` (``-`` is stdout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

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
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write --json {json_path}: {exc.strerror}") from None


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
