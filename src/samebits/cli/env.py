"""``samebits env``: this machine's fingerprint, or the difference between two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Column, Table

from samebits.files import BadJson, read_json
from samebits.cli import inputs as opts
from samebits.cli.output import consoles, write_json
from samebits.errors import UserError

ENV_DIFF_SCHEMA_VERSION = 1


def load_fingerprint(path: str):  # -> Fingerprint
    """Read a fingerprint JSON file written by ``samebits env --json``; bad files are user errors."""
    from samebits.fingerprint import Fingerprint

    p = Path(path)
    if not p.is_file():
        raise UserError(f"fingerprint file '{path}' does not exist")
    try:
        return Fingerprint.from_dict(read_json(p))
    except BadJson as exc:
        raise UserError(f"'{path}' is {exc}; write one with `samebits env --json FILE`") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"'{path}' is not a samebits fingerprint: {exc}") from None


def env_command(
    other: Optional[str] = typer.Argument(
        None, metavar="[B.json]", help="With --diff: the second fingerprint (default: this machine)."
    ),
    diff: Optional[str] = typer.Option(
        None, "--diff", metavar="A.json", help="Compare fingerprint A with B (or with this machine)."
    ),
    json_path: Optional[str] = opts.JsonOpt,
    devices: bool = typer.Option(
        True, "--devices/--no-devices", help="List CUDA devices (initialises CUDA where present)."
    ),
) -> None:
    """Show everything about this machine that can change a model's bits.

    With --diff, list the fields that differ, each with its likely effect on bits; exits 1 when
    a field that changes bits differs, 0 otherwise.
    """
    from samebits.fingerprint import Fingerprint

    console = consoles(json_path)
    if other is not None and diff is None:
        raise UserError("a second fingerprint file is only read with --diff A.json [B.json]")
    if diff is None:
        fp = Fingerprint.capture(devices=devices)
        write_json({"kind": "fingerprint", **fp.to_dict()}, json_path)
        _render_fingerprint(console, fp.to_dict())
        return
    a = load_fingerprint(diff)
    b = load_fingerprint(other) if other else Fingerprint.capture(devices=devices)
    changes = a.diff(b)
    write_json(
        {
            "kind": "env-diff",
            "schema_version": ENV_DIFF_SCHEMA_VERSION,
            "a": diff,
            "b": other or "this machine",
            "changes": [c.to_dict() for c in changes],
        },
        json_path,
        inputs=tuple(p for p in (diff, other) if p),
    )
    if not changes:
        console.print(f"No differences between {escape(diff)} and {escape(other or 'this machine')}.")
        return
    table = Table(
        *(Column(escape(h), overflow="fold") for h in ("field", diff, other or "this machine", "likely effect")),
        title="Fingerprint differences",
    )
    for c in changes:
        table.add_row(("[bold]" if c.affects_bits else "") + escape(c.field), _text(c.old), _text(c.new), c.note)
    console.print(table)
    affecting = sum(c.affects_bits for c in changes)
    console.print(f"{len(changes)} field(s) differ, {affecting} of them can change bits.")
    if affecting:
        raise typer.Exit(1)


def _text(value: object) -> str:
    """A value whole (a narrow terminal folds it; nothing is cut)."""
    return escape(value if isinstance(value, str) else json.dumps(value))


def _render_fingerprint(console, data: dict) -> None:
    from samebits.fingerprint.diff import flatten_fields

    table = Table(
        Column("field", overflow="fold", ratio=1),
        Column("value", overflow="fold", ratio=1),
        title="samebits environment fingerprint",
        box=None,
        title_justify="left",
    )
    for field, value in flatten_fields(data).items():
        if field not in ("kind", "schema_version"):
            table.add_row(escape(field), _text(value))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("env")(env_command)
