"""``--portable LEVEL`` on the commands that run a model: the command starts itself again under
the level (the libraries read it only when they load), then runs as asked."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from samebits.errors import UserError

PortableOpt = typer.Option(
    None,
    "--portable",
    metavar="LEVEL",
    help="Run on one baseline's code paths, the same on every CPU that can run it: x86-64-v3 (AVX2/FMA), x86-64-v2 (SSE4.2) or native (off). The command starts itself again with MKL, oneDNN and ATen pinned (docs/portable.md).",
)

# the command line of this process when it came through samebits.cli.app.main (None otherwise:
# a command invoked in-process, e.g. by a test's CliRunner, cannot start itself again)
ARGV: list[str] | None = None


def enter(name: Optional[str], why: str = "") -> Optional[str]:
    """Make this command run under portable level ``name`` (``None``: as it is); the level it runs
    under. Starts the command again when it does not run it yet; ``why`` is said on stderr."""
    from samebits.determinism.portable import NATIVE, active_level, cpu_flags, level, reexec_under

    if name is None:
        return active_level()
    found = level(name, cpu_flags())
    running = active_level()
    if found.name == NATIVE:
        if running is not None:
            raise UserError(f"--portable native: this process was started under portable level {running}")
        return None
    if running == found.name:
        return running
    if ARGV is None:
        raise UserError(
            f"--portable {found.name} starts the command again, which only the samebits command line can do; "
            f"start this process with `samebits run --portable {found.name} -- ...`"
        )
    if why:
        print(f"samebits: {why}", file=sys.stderr)
    reexec_under(found.name, ARGV)
    return found.name  # pragma: no cover - reexec_under does not return
