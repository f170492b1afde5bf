"""``samebits demo list``: the built-in demo models."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# Listed here without importing torch, so that --help stays fast; a test keeps it equal to DEMOS.
DEMO_NAMES = ("mlp", "cnn", "transformer", "detector")

demo_app = typer.Typer(
    help="The built-in demo models, used as MODEL `demo:NAME`: " + ", ".join(f"demo:{n}" for n in DEMO_NAMES) + ".",
    no_args_is_help=True,
)


@demo_app.command("list")
def list_demos() -> None:
    """List the demo models with what each one shows."""
    from samebits.models.demos import describe_demos

    table = Table("MODEL", "what it is", box=None)
    for name, text in describe_demos().items():
        table.add_row(f"demo:{name}", escape(text))
    Console(highlight=False).print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(demo_app, name="demo")
