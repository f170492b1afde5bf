"""``samebits doctor``: run a model and measure the production mistakes it has."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from samebits.cli import inputs as opts
from samebits.cli.progress import Progress
from samebits.cli.output import check_report_paths, consoles, write_html, write_json
from samebits.diagnosis.options import DoctorOptions

D = DoctorOptions()  # the library's defaults, declared once

STYLE = {
    "error": "bold red",
    "warning": "yellow",
    "info": "cyan",
    "ran": "green",
    "skipped": "dim",
    "error-probe": "magenta",
}


def doctor_command(
    model: str = opts.ModelArg,
    input_file: Optional[str] = opts.InputOpt,
    input_shape: Optional[list[str]] = opts.ShapeOpt,
    dtype: Optional[list[str]] = opts.DtypeOpt,
    int_range: Optional[str] = opts.IntRangeOpt,
    device: str = opts.DeviceOpt,
    iterations: int = typer.Option(
        D.iterations, "--iterations", help="Forwards of the memory probe (each in a fresh process)."
    ),
    memory_cap: Optional[float] = typer.Option(
        None,
        "--memory-cap",
        metavar="MB",
        help="Stop the memory probe once it grew this much [default: a quarter of RAM, at most 2048].",
    ),
    batch: int = typer.Option(D.batch, "--batch", help="Batch size of the throughput and batch-variance probes."),
    backends: str = typer.Option(
        ",".join(D.backends),
        "--backends",
        help="Backends to try against eager (comma-separated; '' for none).",
    ),
    timeout: float = typer.Option(
        D.timeout,
        "--timeout",
        help="Seconds a forward (and each child process) may go without progress; exit 2 past it.",
    ),
    json_path: Optional[str] = opts.JsonOpt,
    html_path: Optional[str] = opts.HtmlOpt,
) -> None:
    """Run MODEL as it is and measure its production mistakes.

    Modules in training mode, grad on outputs, memory growth when outputs are kept (as-is vs
    inference_mode, in child processes, capped), per-sample vs batched throughput, batch
    variance, threads vs cores, faster backends with their bits. Exit 1 when there is a warning
    or an error.
    """
    from samebits.deadline import Watchdog
    from samebits.diagnosis import doctor

    console = consoles(json_path)
    opts.bound_loading(timeout)
    check_report_paths(json_path, html_path)
    loaded, inputs, _ = opts.load_target(model, input_file, input_shape, dtype, int_range, 0)
    with Progress("doctor") as progress, Watchdog(timeout, f"MODEL {model}"):
        report = doctor(
            loaded,
            inputs,
            device=device,
            iterations=iterations,
            memory_cap_mb=memory_cap,
            batch=batch,
            backends=tuple(b.strip() for b in backends.split(",") if b.strip()),
            timeout=timeout,
            progress=progress.update,
        )
    data = report.to_dict()
    write_json(data, json_path)
    write_html(data, html_path)
    counts = {s: sum(f.severity == s for f in report.findings) for s in ("error", "warning", "info")}
    console.print(
        f"[bold]{escape(report.model)}[/bold] ({escape(report.inputs)}): {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s) in {report.seconds:.1f} s\n"
    )
    for f in report.findings:
        console.print(
            f"[{STYLE[f.severity]}]{f.severity:<7}[/] {f.code} {f.name}: {escape(f.message)}\n        fix: {escape(f.fix)}"
        )
    table = Table("probe", "status", "what was measured", box=None, title="\nprobes", title_justify="left")
    for p in report.probes:
        table.add_row(
            p.probe, f"[{STYLE['error-probe' if p.status == 'error' else p.status]}]{p.status}[/]", escape(p.summary)
        )
    console.print(table)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
