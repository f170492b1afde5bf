"""``samebits predict``: offline batch inference over files, resumable."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Optional

import typer

from samebits.cli.portable import PortableOpt, enter as enter_portable
from samebits.cli import inputs as opts
from samebits.errors import UserError


def _numbers(text: str | None, n: int, what: str, kind: type = float) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(kind(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != n:
        raise UserError(f"{what} takes {n} comma-separated {'integers' if kind is int else 'numbers'}, not '{text}'")
    return values


@contextlib.contextmanager
def _progress() -> Iterator[Callable[[int, int], None]]:
    """A rich bar (samples/s, ETA) on a terminal; a plain line per shard otherwise."""
    if not sys.stderr.isatty():
        yield lambda done, total: typer.echo(f"{done}/{total} samples", err=True)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("predict"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} samples/s"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("predict", total=None, rate="-")
        started = time.monotonic()

        def update(done: int, total: int) -> None:
            rate = done / max(time.monotonic() - started, 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{rate:,.0f}")

        yield update


def predict_command(
    model: str = opts.ModelArg,
    inputs: Optional[list[str]] = typer.Argument(
        None,
        metavar="INPUT...",
        help="Input files or folders: tensor files (.npy, .safetensors, .pt), Parquet files, or images.",
    ),
    out_dir: str = typer.Option(
        ...,
        "-o",
        "--output",
        metavar="OUT_DIR",
        callback=opts.absolute,
        help="Folder for the shards and manifest.json.",
    ),
    batch_size: int = typer.Option(64, "--batch-size", help="Samples per call to the Predictor."),
    max_batch_size: Optional[int] = typer.Option(
        None,
        "--max-batch-size",
        min=1,
        help="The largest batch the Predictor calibrates and runs [default: 256, within its time and memory budget].",
    ),
    backend: str = typer.Option(
        "eager",
        "--backend",
        help="Predictor backend (eager, torchscript, export, onnxruntime, ...; auto: the fastest measured here among those with eager's bits).",
    ),
    shard_size: int = typer.Option(1000, "--shard-size", help="Samples per output shard."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in OUT_DIR: complete shards are kept."),
    workers: int = typer.Option(1, "--workers", help="Worker processes, or Ray actors (MODEL must be a spec)."),
    engine: str = typer.Option(
        "local", "--engine", help="local (worker processes here) or ray (Ray actors: a local Ray, or RAY_ADDRESS)."
    ),
    device: str = opts.DeviceOpt,
    threads_per_worker: Optional[int] = typer.Option(
        None,
        "--threads-per-worker",
        help="Threads per worker. Default: the cores shared out, or 1 where the thread count changes the model's bits.",
    ),
    skip_bad: bool = typer.Option(
        False, "--skip-bad", help="Leave out samples that cannot be read and list them in the manifest."
    ),
    image_size: Optional[str] = typer.Option(
        None, "--image-size", metavar="H,W", help="Images: resize to H,W (224,224)."
    ),
    mean: Optional[str] = typer.Option(None, "--mean", metavar="R,G,B", help="Images: mean per channel (ImageNet's)."),
    std: Optional[str] = typer.Option(None, "--std", metavar="R,G,B", help="Images: std per channel (ImageNet's)."),
    portable: Optional[str] = PortableOpt,
) -> None:
    """Run MODEL over every sample in INPUT... and write the outputs as shards in OUT_DIR.

    A tensor file holds a batch (dim 0 = samples); a Parquet row is a sample (columns go to
    the forward's inputs by name); an image is a sample (decoded, RGB, resized bilinear, scaled
    to [0, 1], normalised: docs/predict.md). A folder is its files in sorted name order. Outputs
    go to OUT_DIR/shard-NNNNNN.safetensors, written atomically; manifest.json records the run
    and, per complete shard, its digest and per-sample output digests. A sample's output does
    not depend on --batch-size, --shard-size or --workers. A run stopped at any point continues
    with --resume and gives the same bytes; an existing OUT_DIR is refused without it.
    """
    enter_portable(portable)
    from samebits.offline.images import IMAGENET_MEAN, IMAGENET_STD, ImagePrep
    from samebits.offline.run import predict

    if not inputs:
        raise UserError(f"give MODEL and INPUT...: samebits predict MODEL INPUT... -o OUT_DIR (got only '{model}')")
    opts.bound_loading()

    image = None
    if image_size or mean or std:
        size = _numbers(image_size, 2, "--image-size", int) or (224, 224)
        image = ImagePrep(
            (int(size[0]), int(size[1])),
            _numbers(mean, 3, "--mean") or IMAGENET_MEAN,  # type: ignore[arg-type]
            _numbers(std, 3, "--std") or IMAGENET_STD,  # type: ignore[arg-type]
        )
    with _progress() as progress:
        report = predict(
            model,
            inputs,
            out_dir,
            batch_size=batch_size,
            max_batch_size=max_batch_size,
            backend=backend,
            shard_size=shard_size,
            resume=resume,
            workers=workers,
            engine=engine,
            threads_per_worker=threads_per_worker,
            skip_bad=skip_bad,
            image=image,
            progress=progress,
            device=device,
        )
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    skipped = f", {report.skipped} skipped (listed in manifest.json)" if report.skipped else ""
    typer.echo(
        f"{report.samples} samples in {report.shards} shards ({report.computed} computed now{skipped}) "
        f"in {report.out_dir} ({report.seconds:.1f} s, {report.threads['per_worker']} thread(s) per worker: "
        f"{report.threads['why']})"
    )


def register(app: typer.Typer) -> None:
    app.command("predict")(predict_command)
