"""``samebits record``: pin a model's outputs in a golden file."""

from __future__ import annotations

from typing import Optional

import typer

from samebits.cli.portable import PortableOpt, enter as enter_portable
from samebits.cli import inputs as opts
from samebits.golden.options import RecordOptions

D = RecordOptions()  # the library's defaults, declared once


def record_command(
    model: str = opts.ModelArg,
    output: str = typer.Option(
        ..., "-o", "--output", metavar="FILE.safetensors", callback=opts.absolute, help="The golden file to write."
    ),
    input_file: Optional[str] = opts.InputOpt,
    input_shape: Optional[list[str]] = opts.ShapeOpt,
    dtype: Optional[list[str]] = opts.DtypeOpt,
    int_range: Optional[str] = opts.IntRangeOpt,
    force: bool = typer.Option(D.force, "--force", help="Overwrite an existing golden."),
    seed: int = typer.Option(D.seed, "--seed", help="Seed of the determinism profile (and of random inputs)."),
    threads: Optional[int] = typer.Option(D.threads, "--threads", min=1, help="Intra-op threads during the run."),
    no_deterministic: bool = typer.Option(
        not D.deterministic, "--no-deterministic", help="Run without samebits' deterministic profile."
    ),
    runtime: Optional[str] = typer.Option(
        D.runtime,
        "--runtime",
        metavar="predictor[:BACKEND]",
        help="Record through a samebits.Predictor (as samebits serve runs it); verify runs it the same way.",
    ),
    device: str = opts.DeviceOpt,
    portable: Optional[str] = PortableOpt,
) -> None:
    """Pin MODEL's outputs in a golden file.

    Runs MODEL once (inside samebits.deterministic() by default) and writes its inputs, outputs,
    per-module digests and this machine's fingerprint to one safetensors file. An existing file
    is never overwritten without --force.
    """
    enter_portable(portable)
    from samebits.golden import record
    from samebits.measure.prepare import prepare

    opts.bound_loading()
    loaded, inputs, model_dtype = opts.load_target(model, input_file, input_shape, dtype, int_range, seed)
    loaded.model, inputs = prepare(loaded.model, inputs, device, model_dtype)
    path = record(
        loaded,
        output,
        inputs,
        force=force,
        deterministic=not no_deterministic,
        seed=seed,
        threads=threads,
        runtime=runtime,
        device=device,
    )
    typer.echo(f"recorded {path} ({loaded.spec})")


def register(app: typer.Typer) -> None:
    app.command("record")(record_command)
