"""``samebits cache list|clear``: the Predictor's compiled artifacts and calibrations."""

from __future__ import annotations

import time

from typing import Optional

import typer

from samebits.cli.inputs import absolute
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

cache_app = typer.Typer(help="The Predictor's cached artifacts and calibrations.", no_args_is_help=True)
DirOpt = typer.Option(
    None, "--cache-dir", metavar="DIR", callback=absolute, help="Default: $SAMEBITS_CACHE_DIR or ~/.cache/samebits."
)


@cache_app.command("list")
def list_command(cache_dir: Optional[str] = DirOpt) -> None:
    """List cached artifacts and calibrations with their sizes."""
    from pathlib import Path

    from samebits.runtime.cache import ArtifactCache, default_cache_dir

    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    entries = ArtifactCache(folder).entries()
    console = Console(highlight=False)
    if not entries:
        console.print(f"{escape(str(folder))}: empty", soft_wrap=True)  # a long path stays one line
        return
    table = Table(
        Column("what it is", overflow="fold", ratio=3),
        Column("written", no_wrap=True),
        Column("size", justify="right", no_wrap=True),
        Column("file", overflow="fold", ratio=2),
        box=None,
        title=escape(str(folder)),
        title_justify="left",
    )
    for e in entries:
        written = _when(e["written"])
        table.add_row(escape(e["what"]), written, f"{e['bytes'] / 1024:.1f} KiB", escape(e["name"]))
    console.print(table)


def _when(written: float | None) -> str:
    """A manifest's time stamp as local time, ``-`` where it is missing or no time (1e300)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(written)) if written else "-"
    except (OverflowError, OSError, ValueError):
        return "-"


@cache_app.command("clear")
def clear_command(cache_dir: Optional[str] = DirOpt) -> None:
    """Remove every cached artifact and calibration (they are rebuilt on demand).

    Only what samebits wrote goes: the entries in the folder's manifest. A folder without the
    samebits marker is refused and nothing in it is touched."""
    from pathlib import Path

    from samebits.runtime.cache import ArtifactCache, default_cache_dir

    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    typer.echo(f"removed {ArtifactCache(folder).clear()} entries from {folder}")


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")
