"""``samebits run -- CMD``: start CMD with the variables that only work before a process starts."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from samebits.errors import UserError


def run_command(
    ctx: typer.Context,
    seed: int = typer.Option(0, "--seed", help="PYTHONHASHSEED and SAMEBITS_SEED for CMD."),
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="OMP_NUM_THREADS and MKL_NUM_THREADS for CMD."
    ),
    deterministic: bool = typer.Option(
        False,
        "--deterministic",
        help="When CMD is python running a script, -m module or -c code: enter samebits.deterministic(seed) first.",
    ),
    portable: Optional[str] = typer.Option(
        None,
        "--portable",
        metavar="LEVEL",
        help="Pin MKL, oneDNN and ATen to one baseline's code paths, the same on every CPU that can run it: x86-64-v3 (AVX2/FMA), x86-64-v2 (SSE4.2) or native (off).",
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Say on stderr what was set and what was overridden."),
) -> None:
    """Run CMD with PYTHONHASHSEED, CUBLAS_WORKSPACE_CONFIG and SAMEBITS_SEED set before it starts.

    Setting these inside a running interpreter does nothing, so samebits replaces itself (exec)
    with CMD in an environment that has them. CMD not found exits 127, like a shell.

    Example: samebits run --seed 0 --deterministic -- python infer.py --batch 8
    """
    from samebits.runner import build_command, child_environment, exec_command

    cmd = list(ctx.args)
    if not cmd:
        raise UserError("no command given; usage: samebits run [OPTIONS] -- CMD [ARGS...]")
    if not 0 <= seed <= 2**32 - 1:
        raise UserError(f"--seed must be in [0, {2**32 - 1}] (the range of PYTHONHASHSEED), got {seed}")
    pinned = None
    if portable is not None:
        from samebits.determinism.portable import cpu_flags, level

        pinned = level(portable, cpu_flags()).env
    env, notes = child_environment(dict(os.environ), seed=seed, threads=threads, portable=pinned)
    argv, note = build_command(cmd, seed=seed, threads=threads, deterministic=deterministic)
    if note:
        notes.append(note)
    unapplied = deterministic and argv == cmd  # --deterministic could not wrap CMD: always said
    for line in notes if verbose else [note] if note and unapplied else []:  # -v: everything it set
        print(f"samebits run: {line}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    raise typer.Exit(exec_command(argv, env))


def register(app: typer.Typer) -> None:
    app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )(run_command)
