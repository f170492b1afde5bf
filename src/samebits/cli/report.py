"""``samebits report FILE.json --html OUT.html``: render a saved ``--json`` report without re-running."""

from __future__ import annotations

from pathlib import Path

import typer

from samebits.cli.inputs import absolute

from samebits.files import BadJson, read_json
from samebits.errors import UserError


def report_command(
    report_json: str = typer.Argument(
        ..., metavar="FILE.json", help="A report saved with --json (check, verify, doctor, bench)."
    ),
    html_path: str = typer.Option(
        ..., "--html", metavar="OUT.html", callback=absolute, help="The self-contained HTML page to write."
    ),
) -> None:
    """Render a saved report as one self-contained HTML page (charts as inline SVG, no script,
    no network request): it opens from a mail attachment on an offline machine."""
    from samebits.cli.output import check_report_paths, write_html

    path = Path(report_json)
    if not path.is_file():
        raise UserError(f"report '{report_json}' does not exist (save one with --json FILE)")
    try:
        data = read_json(path)
    except BadJson as exc:
        raise UserError(f"'{report_json}' is not a JSON report: it is {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"'{report_json}' is not a samebits report (a JSON {type(data).__name__}, not an object)")
    check_report_paths(None, html_path, inputs=(report_json,))
    try:
        write_html(data, html_path, inputs=(report_json,))
    except (
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        ValueError,
        OverflowError,
    ) as exc:  # a field of another type
        raise UserError(
            f"'{report_json}' is not a complete samebits {data.get('kind', '')} report ({type(exc).__name__}: {exc})"
        ) from None
    typer.echo(f"wrote {html_path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
