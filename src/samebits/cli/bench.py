"""``samebits bench``: throughput, latency, memory and bits of every way to run a model."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from samebits.cli.portable import PortableOpt, enter as enter_portable
from samebits.cli import inputs as opts
from samebits.cli.progress import Progress
from samebits.cli.output import check_report_paths, consoles, fitted_table, write_html, write_json
from samebits.runtime.options import BenchOptions

D = BenchOptions()  # the library's defaults, declared once


def bench_command(
    model: str = opts.ModelArg,
    input_file: Optional[str] = opts.InputOpt,
    input_shape: Optional[list[str]] = opts.ShapeOpt,
    dtype: Optional[list[str]] = opts.DtypeOpt,
    int_range: Optional[str] = opts.IntRangeOpt,
    batch_sizes: str = typer.Option(",".join(map(str, D.batch_sizes)), "--batch-sizes", help="Batch sizes to measure."),
    backends: str = typer.Option(
        ",".join(D.backends),
        "--backends",
        help="Predictor backends, comma-separated; auto: the fastest per batch size among those with eager's bits, measured here.",
    ),
    rounds: int = typer.Option(
        D.rounds, "--rounds", help="Interleaved rounds per batch size (fewer when --budget runs out)."
    ),
    budget: float = typer.Option(D.budget, "--budget", help="Seconds of timing per batch size."),
    no_memory: bool = typer.Option(
        not D.memory, "--no-memory", help="Skip peak memory (one fresh process per configuration)."
    ),
    max_batch_size: Optional[int] = typer.Option(
        D.max_batch_size,
        "--max-batch-size",
        min=1,
        help="The Predictors calibrate up to this many rows [default: the largest of --batch-sizes].",
    ),
    timeout: float = typer.Option(
        D.timeout, "--timeout", help="Seconds a forward may go without progress before the bench ends (exit 2)."
    ),
    device: str = opts.DeviceOpt,
    json_path: Optional[str] = opts.JsonOpt,
    html_path: Optional[str] = opts.HtmlOpt,
    portable: Optional[str] = PortableOpt,
) -> None:
    """Measure every way to run MODEL side by side, with their bits.

    One table: the per-sample loop, plain batched eager, and the Predictor per backend,
    invariant and not: samples/s, latency per batch (p50/p99), peak memory, whether each row
    keeps its bits, the speedup over the loop, and what invariance costs.
    """
    enter_portable(portable)
    from samebits.deadline import Watchdog
    from samebits.errors import UserError
    from samebits.runtime.bench import bench

    sizes = opts.parse_ints(batch_sizes, "--batch-sizes") or ()
    if not sizes or min(sizes) < 1:
        raise UserError("--batch-sizes must be positive")
    console = consoles(json_path)
    opts.bound_loading(timeout)
    check_report_paths(json_path, html_path)
    loaded, inputs, _ = opts.load_target(model, input_file, input_shape, dtype, int_range, 0)
    with Progress("bench") as progress, Watchdog(timeout, f"MODEL {model}"):
        report = bench(
            loaded,
            inputs,
            batch_sizes=sizes,
            backends=tuple(b.strip() for b in backends.split(",") if b.strip()),
            rounds=rounds,
            budget=budget,
            memory=not no_memory,
            max_batch_size=max_batch_size,
            progress=progress.update,
            device=device,
        )
    data = report.to_dict()
    write_json(data, json_path)
    write_html(data, html_path)
    render(console, report)


def render(console: Console, report: Any) -> None:
    """The bench table and its notes (numbers are never cut: text columns wrap). Every speedup
    is a range over the rounds, or not printed where the machine was busy."""
    from samebits.measure.load import Load
    from samebits.measure.timing import Ratio

    load = Load.from_dict(report.load)
    rows = [
        [
            escape(_label(r.config)),
            str(r.batch),
            f"{r.samples_per_s:,.0f}",
            f"{r.p50_ms:.2f}/{r.p99_ms:.2f}",
            f"{r.peak_mb:.1f}" if r.peak_mb is not None else "-",
            f"{'yes' if r.identical_to_reference else 'no'}/{'yes' if r.same_as_alone else 'no'}",
            _range(r.speedup, load),
        ]
        for r in report.rows
    ]
    head = ["config", "batch", "samples/s", "p50/p99 ms", "peak MB", "= loop/ alone", "vs loop"]
    table = fitted_table(
        head,
        rows,
        set(range(1, 7)),
        console.width,
        title=f"{escape(report.model)} ({report.seconds:.0f} s)",
        title_justify="left",
    )
    console.print(table)
    console.print(
        "p50/p99: latency of a batch; = loop/alone: every row has the bits of the per-sample loop / the bits this configuration gives the sample alone (batch invariance); (any size): a Predictor with invariant=False, running batches as they come; vs loop: the throughput against the loop's, lowest-highest over the rounds."
    )
    if load is not None:
        console.print(
            f"measured under {load.describe()}: "
            + (
                "the machine was busy, so no speedup is measurable here; bench needs a quiet machine"
                if load.busy
                else "bench needs a quiet machine, and the ranges show how quiet this one was"
            )
        )
    for name, sizes in report.invariance.items():
        console.print(f"{escape(name)} runs only the batch sizes it verified: {', '.join(map(str, sizes))}")
    largest = max(r.batch for r in report.rows)
    for backend, data in report.invariance_cost_spread.items():  # invariant / any-size throughput
        ratio = Ratio.from_dict(data, load)
        if ratio is None:
            continue
        where = f"batch invariance (predictor:{backend} at batch {largest})"
        if not ratio.clear:
            console.print(f"{where} costs {ratio.text()} of the throughput of batching at any size")
        elif ratio.high < 1:
            console.print(
                f"{where} costs {100 * (1 - ratio.median):.0f}% of the throughput of batching at any size "
                f"({100 * (1 - ratio.high):.0f}-{100 * (1 - ratio.low):.0f}% over {ratio.rounds} rounds)"
            )
        else:
            console.print(f"{where} costs no throughput here: {ratio.text()} that of batching at any size")
    for name, plan in report.plans.items():
        console.print(f"{escape(name)}: {escape(plan)}")
    for line in report.skipped:
        console.print(f"skipped {escape(line)}")


def _label(config: str) -> str:
    """``predictor:onnxruntime (any size)`` as ``Predictor onnxruntime (any size)``: words a
    narrow column wraps between (the JSON keeps the config's name)."""
    return f"Predictor {config.removeprefix('predictor:')}" if config.startswith("predictor:") else config


def _range(speedup: dict[str, Any] | None, load: Any) -> str:
    """A speedup as the range of its rounds (``4.8-5.3x``); ``-`` for the loop itself or on a busy machine."""
    if speedup is None or (load is not None and load.busy):
        return "-"
    low, high = speedup["min"], speedup["max"]
    return f"{low:.1f}-{high:.1f}x" if high < 100 else f"{low:,.0f}-{high:,.0f}x"


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)
