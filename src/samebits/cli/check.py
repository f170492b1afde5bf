"""``samebits check``: run a model under every variation that changes bits."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from samebits.checker.options import CheckOptions
from samebits.cli.portable import PortableOpt, enter as enter_portable
from samebits.cli import inputs as opts
from samebits.cli.progress import Progress
from samebits.errors import UserError
from samebits.cli.output import check_report_paths, consoles, fitted_table, write_html, write_json

D = CheckOptions()  # the library's defaults, declared once

STYLE = {"identical": "green", "close": "yellow", "diverged": "bold red", "skipped": "dim", "error": "magenta"}


GROWTH_SHOWN = 6  # modules after the origin shown in the terminal
OUTPUTS_SHOWN = 8  # outputs that differ shown in the terminal, per axis


def check_command(
    ctx: typer.Context,
    model: str = opts.ModelArg,
    input_file: Optional[str] = opts.InputOpt,
    input_shape: Optional[list[str]] = opts.ShapeOpt,
    dtype: Optional[list[str]] = opts.DtypeOpt,
    int_range: Optional[str] = opts.IntRangeOpt,
    axes: str = typer.Option(
        ",".join(D.axes), "--axes", help="Axes to run, comma-separated.", show_default=", ".join(D.axes)
    ),
    runs: int = typer.Option(D.runs, "--runs", help="Runs on the repeat and seed axes."),
    processes: int = typer.Option(D.processes, "--processes", help="Fresh processes on the process axis."),
    threads: Optional[str] = typer.Option(
        None, "--threads", metavar="1,N", help="Thread counts on the threads axis [default: 1 and this machine's]."
    ),
    batch_sizes: str = typer.Option(
        ",".join(map(str, D.batch_sizes)), "--batch-sizes", help="Batch sizes on the batch axis."
    ),
    batch_dim: int = typer.Option(D.batch_dim, "--batch-dim", help="The batch dimension of the inputs."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance (with --rtol); default: bits."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance (with --atol); default: bits."),
    seed: int = typer.Option(D.seed, "--seed", help="Seed for the runs and for random inputs."),
    device: str = opts.DeviceOpt,
    timeout: float = typer.Option(
        D.timeout,
        "--timeout",
        help="Seconds a forward (and each child process) may go without progress; exit 2 past it.",
    ),
    no_localize: bool = typer.Option(False, "--no-localize", help="Skip finding the first divergent module."),
    runtime: Optional[str] = typer.Option(
        None,
        "--runtime",
        metavar="predictor[:BACKEND]",
        help="Run the axes through a samebits.Predictor, to see a fix work.",
    ),
    max_batch_size: Optional[int] = typer.Option(
        None,
        "--max-batch-size",
        min=1,
        help="With --runtime: the largest batch the Predictor calibrates [default: 256, within its time and memory budget].",
    ),
    batch_invariant: bool = typer.Option(
        False,
        "--batch-invariant",
        help="Run every forward inside samebits.batch_invariant(): matmuls, convolutions and attention on fixed tiles of rows, so a row's bits cannot depend on its batch.",
    ),
    json_path: Optional[str] = opts.JsonOpt,
    html_path: Optional[str] = opts.HtmlOpt,
    out_dir: Optional[str] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        callback=opts.absolute,
        help="Also write a repro folder: report, fingerprint, inputs, origin outputs, command.",
    ),
    generate: Optional[int] = typer.Option(
        None,
        "--generate",
        metavar="N",
        help="Check generation of N tokens instead (a model with generate() and prompts): axes repeat, batch, padding, cache, attention, threads, process; each axis that differs gets its cause, measured.",
    ),
    sample: bool = typer.Option(
        False,
        "--sample",
        help="With --generate: sample instead of greedy decoding, the RNG seeded with --seed before every generation.",
    ),
    padding_side: Optional[str] = typer.Option(
        None,
        "--padding-side",
        metavar="SIDE",
        help="With --generate: pad prompts on the left or right (default: right for an encoder-decoder, as its tokenizers do; left otherwise).",
    ),
    from_dir: Optional[str] = typer.Option(
        None,
        "--from",
        metavar="DIR",
        help="Re-run the check of a repro folder (its inputs and options) and say what changed. MODEL is re-used only when it is data.",
    ),
    portable: Optional[str] = PortableOpt,
) -> None:
    """Run MODEL under every variation that changes bits, and say where and why.

    Reports which axes change the bits, where the difference starts (the first module), why
    (found by controlled re-runs) and the fix.

    Exit 0 when every axis is identical (or close within --atol/--rtol), 1 when one diverged,
    2 on bad input or when an axis could not run and none diverged.
    """
    enter_portable(portable)
    from samebits.checker import check
    from samebits.deadline import Watchdog
    from samebits.tensors.compare import check_tolerances

    console = consoles(json_path)
    opts.bound_loading(timeout)
    if generate is not None:
        if out_dir or from_dir:
            raise UserError("--generate does not take --out or --from yet")
        if batch_invariant:
            raise UserError("--generate does not take --batch-invariant yet")
        if runtime:
            raise UserError(
                "--generate does not take --runtime: Predictor.generate gives each prompt the bits it gets "
                "alone by construction (docs/predictor.md); check --generate measures the model's own generate"
            )
        check_report_paths(json_path, html_path)
        typed_axes = getattr(ctx.get_parameter_source("axes"), "name", "DEFAULT") != "DEFAULT"
        _check_generation(
            console,
            model,
            input_file,
            input_shape,
            dtype,
            int_range,
            seed,
            generate,
            axes if typed_axes else None,
            json_path,
            html_path,
            sample,
            padding_side,
        )
        return
    if sample or padding_side:
        raise UserError(f"{'--sample' if sample else '--padding-side'} goes with --generate N")
    check_report_paths(json_path, html_path)
    stored = None
    if from_dir is not None:
        from samebits.checker.repro import model_for, read_repro
        from samebits.models import load_model

        stored_model, options, inputs, stored = read_repro(from_dir)
        source = ctx.get_parameter_source("model")
        typed = getattr(source, "name", "DEFAULT") != "DEFAULT"  # typer bundles its own click: compare by name
        model = model_for(stored_model, model if typed else None, from_dir)
        loaded = load_model(model)
    else:
        tol_a, tol_r = check_tolerances(atol, rtol)
        loaded, inputs, model_dtype = opts.load_target(model, input_file, input_shape, dtype, int_range, seed)
        options = CheckOptions(
            axes=tuple(a.strip() for a in axes.split(",") if a.strip()),
            runs=runs,
            processes=processes,
            threads=opts.parse_ints(threads, "--threads"),
            batch_sizes=opts.parse_ints(batch_sizes, "--batch-sizes") or D.batch_sizes,
            batch_dim=batch_dim,
            atol=tol_a,
            rtol=tol_r,
            seed=seed,
            device=device,
            dtype=model_dtype,
            timeout=timeout,
            localize=not no_localize,
            runtime=runtime,
            max_batch_size=max_batch_size,
            batch_invariant=batch_invariant,
        )
    if out_dir is not None:
        from samebits.checker.repro import _writable

        _writable(Path(out_dir))  # refused before the work, not after
    with Progress("checking") as progress, Watchdog(options.timeout, f"MODEL {model}"):
        report = check(loaded, inputs, progress=progress.update, **dataclasses.asdict(options))
    data = report.to_dict()
    write_json(data, json_path)
    write_html(data, html_path)
    if out_dir is not None:
        from samebits.checker.repro import write_repro

        write_repro(out_dir, report, inputs_of(loaded, inputs), options)
    render(console, report)
    if stored is not None:
        from samebits.checker.repro import changes_since

        changed = changes_since(stored, report)
        console.print("\n[bold]Since the stored run[/bold]: " + ("nothing changed" if not changed else ""))
        for line in changed:
            console.print(f"- {escape(line)}")
    if out_dir is not None:
        console.print(f"repro folder: {escape(out_dir)} (re-run it: samebits check --from {escape(out_dir)})")
    raise typer.Exit(report.exit_code)


def _check_generation(
    console, model, input_file, input_shape, dtype, int_range, seed, n, axes, json_path, html_path, sample, side
):
    from samebits.checker.generation import AXES, check_generation

    loaded, inputs, _ = opts.load_target(model, input_file, input_shape, dtype, int_range, seed)
    chosen = tuple(a.strip() for a in axes.split(",") if a.strip()) if axes else AXES
    with Progress("generating"):
        report = check_generation(
            loaded, inputs, max_new_tokens=n, axes=chosen, sample=sample, seed=seed, padding_side=side
        )
    write_json(report.to_dict(), json_path)
    write_html(report.to_dict(), html_path)
    console.print(f"[bold]{escape(report.headline())}[/bold]")
    console.print(
        f"MODEL {escape(report.model)}, {len(report.prompts)} prompts of {report.prompts} tokens, {n} new tokens"
        f"{f', sampled (seed {seed})' if sample else ', greedy'}, padded on the {report.padding_side}, "
        f"{report.seconds:.1f} s\n"
    )
    rows = [[a.axis, a.tokens, a.scores, escape(a.summary)] for a in report.axes]
    console.print(fitted_table(["axis", "tokens", "score bits", "what was measured"], rows, set(), console.width))
    for a in report.axes:
        for p in a.parted:
            console.print(
                f"{a.axis}: prompt {p.prompt} parts at step {p.step} (position {p.position}): token {p.reference_token} alone, "
                f"{p.other_token} here; the reference's top two scores were {p.margin:.3g} apart"
            )
            if p.module:
                console.print(
                    f"  that step's forward first differs in {escape(p.module)} ({p.module_type}): {p.module_note}"
                )
            elif p.module_note:
                console.print(f"  {escape(p.module_note)}")
    print_causes(console, report.causes)
    raise typer.Exit(report.exit_code)


def inputs_of(loaded, inputs):
    """The inputs the check ran on: those given, else the spec's own example."""
    from samebits.models.target import inputs_for

    return inputs_for(loaded, inputs)


def render(console: Console, report) -> None:  # report: CheckReport
    console.print(f"[bold]{escape(report.headline())}[/bold]")
    console.print(f"MODEL {escape(report.model)}, inputs {escape(report.inputs)}, {report.seconds:.1f} s\n")
    rows = [
        [
            a.axis,
            f"[{STYLE[a.verdict]}]{a.verdict}[/]",
            f"{a.agreed}/{a.runs}" if a.runs else "",
            escape(a.summary or a.reason),
        ]
        for a in report.axes
    ]
    console.print(fitted_table(["axis", "verdict", "agreed", "what was measured"], rows, {2}, console.width))
    for a in report.axes:
        if a.verdict not in ("diverged", "close"):
            continue
        console.print(f"\n[bold]{a.axis}[/bold]: {escape(a.summary)}")
        if a.difference:
            console.print(escape(f"at {a.difference.path}: {a.difference.message}"))
            print_outputs(console, a.difference.outputs)
        if a.origin:
            o = a.origin
            console.print(
                f"starts in [bold]{escape(o.module)}[/bold] ({escape(o.type)})"
                + (f": {escape(o.note)}" if o.note else "")
            )
            if o.op:
                console.print(f"first op inside it that differs: {escape(o.op)}")
            if o.growth:
                shown = [
                    [escape(g.module), escape(g.type), f"{g.max_abs:.3g}", f"{g.mismatched_pct:.1f}%"]
                    for g in o.growth[:GROWTH_SHOWN]
                ]
                head = ["module", "type", "max abs diff", "elements differing"]
                console.print(fitted_table(head, shown, {2, 3}, console.width, names=frozenset({0}), padding=(0, 2)))
                if len(o.growth) > GROWTH_SHOWN:
                    console.print(f"  ... {len(o.growth) - GROWTH_SHOWN} more modules differ (all in --json)")
    print_causes(console, report.causes)
    if report.localization:
        console.print(f"\n{escape(report.localization)}")


def print_outputs(console: Console, outputs: list) -> None:  # list[OutputChange]
    """The outputs that differ, the one a user notices first on top (their order in the report)."""
    if len(outputs) < 2 and not any(c.kind == "flips" for c in outputs):
        return  # the line above already said it
    console.print(f"outputs that differ ({len(outputs)}), as a user sees them:")
    for c in outputs[:OUTPUTS_SHOWN]:
        console.print(escape(f"  {c.line()}"))
    if len(outputs) > OUTPUTS_SHOWN:
        console.print(f"  ... {len(outputs) - OUTPUTS_SHOWN} more (all in --json)")


def print_causes(console: Console, causes: list) -> None:  # list[Cause]
    if causes:
        console.print("\n[bold]Causes[/bold] (each measured)")
    for c in causes:
        mark = " (verified by re-run)" if c.verified else ""
        console.print(
            f"- [bold]{escape(c.code)}[/bold]: {escape(c.summary)}\n  evidence: {escape(c.evidence)}{mark}\n  fix: {escape(c.fix)}"
        )


def register(app: typer.Typer) -> None:
    app.command("check")(check_command)
