"""The ``samebits`` command: subcommands, ``--version``, ``--debug``, and the one place that turns
user errors into a one-line message and exit code 2."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from samebits._version import __version__
from samebits.cli import bench, cache, check, demo, doctor, env, lint, record, run, verify
from samebits.errors import UserError, first_line

app = typer.Typer(
    name="samebits",
    help="Reproducible, fast, memory-safe PyTorch inference, and the proof: same input, same bits.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"samebits {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
) -> None:
    """Exit codes: 0 all good, 1 the check found what it looks for, 2 usage or input error (or a
    timeout, or nothing could run), 3 an internal error (a bug: please report it)."""


check.register(app)
doctor.register(app)
bench.register(app)
lint.register(app)
record.register(app)
verify.register(app)
env.register(app)
run.register(app)
demo.register(app)
cache.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point, and the one error boundary: a :class:`UserError` is one line on stderr and
    exit 2; an interrupt exits 130; anything else is a bug: one line, exit 3 (never 1, which
    means "found what it looks for"), the traceback under ``--debug``."""
    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--")] if "--" in args else args
    debug = "--debug" in own
    try:
        app(args=args, prog_name="samebits")  # exits through SystemExit; usage errors exit 2
    except UserError as exc:
        if debug:
            raise
        typer.echo(f"samebits: error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("samebits: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        typer.echo(f"samebits: internal error: {first_line(exc, with_type=True)}; please report it (rerun with --debug for the traceback)", err=True)
        sys.exit(3)
