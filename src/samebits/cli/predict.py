"""``samebits predict``: offline batch inference over files, resumable."""

from __future__ import annotations

import sys

import typer

from samebits.cli import inputs as opts


def predict_command(
    model: str = opts.ModelArg,
    inputs: list[str] = typer.Argument(
        ..., metavar="INPUT...", help="Input files or folders (.npy, .safetensors, .pt)."
    ),
    out_dir: str = typer.Option(
        ..., "-o", "--output", metavar="OUT_DIR", help="Folder for the shards and manifest.json."
    ),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Samples per call to the Predictor."),
    backend: str = typer.Option("eager", "--backend", help="Predictor backend (eager, onnxruntime, ...)."),
    shard_size: int = typer.Option(1000, "--shard-size", min=1, help="Samples per output shard."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in OUT_DIR: complete shards are kept."),
) -> None:
    """Run MODEL over every sample in INPUT... and write the outputs as shards in OUT_DIR.

    A file holds a batch (dim 0 = samples); a folder is its files in sorted name order. Outputs
    go to OUT_DIR/shard-NNNNNN.safetensors, written atomically, and manifest.json records the run
    and, per complete shard, its digest and per-sample output digests. A sample's output does not
    depend on --batch-size or --shard-size. A run stopped at any point continues with --resume
    and gives the same bytes; an existing OUT_DIR is refused without it.
    """
    from samebits.offline.run import predict

    tty = sys.stderr.isatty()

    def progress(done: int) -> None:
        if tty:
            typer.echo(f"\r{done} samples", err=True, nl=False)
        else:
            typer.echo(f"{done} samples", err=True)

    report = predict(
        model,
        inputs,
        out_dir,
        batch_size=batch_size,
        backend=backend,
        shard_size=shard_size,
        resume=resume,
        progress=progress,
    )
    if tty:
        typer.echo("", err=True)
    typer.echo(
        f"{report.samples} samples in {report.shards} shards ({report.computed} computed now) in {report.out_dir} "
        f"({report.seconds:.1f} s)"
    )


def register(app: typer.Typer) -> None:
    app.command("predict")(predict_command)
