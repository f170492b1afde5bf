"""``samebits verify``: re-run a golden's model and report what changed, by how much, and why."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer


from rich.markup import escape
from rich.table import Table

from samebits.cli import inputs as opts
from samebits.cli.output import check_report_paths, consoles, write_html, write_json
from samebits.cli.portable import enter as enter_portable
from samebits.errors import UserError

STYLE = {"identical": "green", "close": "yellow", "diverged": "bold red"}


def _verify_predictions(out_dir: str, model: Optional[str], shards: int) -> int:
    """``samebits verify OUT_DIR`` for a ``samebits predict`` folder; the exit code."""
    from samebits.offline.verify import verify_predictions

    report = verify_predictions(out_dir, model, shards=shards)
    for problem in report.bad_files:
        typer.echo(problem)
    for check in report.checked:
        state = "identical" if check.first_difference is None else f"differs from sample {check.first_difference}"
        typer.echo(f"shard {check.index} ({check.samples} samples): {state}")
    if not report.identical:
        for change in report.changes[:5]:
            typer.echo(f"  likely cause: {change['field']} {change['old']} -> {change['new']}")
    typer.echo(
        f"{'identical' if report.identical else 'diverged'}: {len(report.checked)} "
        f"shard{'' if len(report.checked) == 1 else 's'} of {out_dir} recomputed"
    )
    return report.exit_code


def verify_command(
    golden: str = typer.Argument(
        ..., metavar="FILE", help="A golden written by `samebits record`, or an OUT_DIR of `samebits predict`."
    ),
    model: Optional[str] = typer.Argument(
        None,
        metavar="[MODEL]",
        help="The model to verify. Default: the MODEL stored in the golden, only when it is data (demo:NAME, .pt2, .onnx); a file.py:factory, module:factory or .pt spec is code, so pass it here.",
    ),
    exact: bool = typer.Option(False, "--exact", help="Require identical bits, whatever the machine."),
    shards: int = typer.Option(
        3,
        "--shards",
        help="For a predict OUT_DIR: how many shards to recompute (every shard file's digest is checked).",
    ),
    layout: bool = typer.Option(
        False,
        "--layout",
        help="Also run with the model's parameters and the inputs re-laid in memory (fresh aligned storage, an offset, transposed strides), each compared with the golden: a golden recorded from a model built in memory holds for one loaded from a file only if every layout agrees.",
    ),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance (with --rtol)."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance (with --atol)."),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        help="cpu, cuda, cuda:N or mps, of the kind the golden was recorded on [default: the golden's device].",
    ),
    json_path: Optional[str] = opts.JsonOpt,
    html_path: Optional[str] = opts.HtmlOpt,
    portable: Optional[str] = typer.Option(
        None,
        "--portable",
        metavar="LEVEL",
        help="Verify on one baseline's code paths: x86-64-v3, x86-64-v2 or native (off) [default: the level the golden was recorded under]. The command starts itself again under it (docs/portable.md).",
    ),
) -> None:
    """Re-run a golden's model (or a predict run's shards) and say what changed, by how much, and why.

    The model runs on the golden's inputs under its determinism profile; every output is
    compared: bits when the fingerprint matches in every field that changes bits, torch's
    per-dtype tolerances when it does not (or as --exact / --atol --rtol say). Exit 0 when all
    match, 1 when one differs, 2 when the file is unreadable. Given the OUT_DIR of `samebits
    predict`, it recomputes --shards of its shards and compares every sample's digest.
    """
    from samebits.golden import verify
    from samebits.offline.verify import is_predictions

    if portable is not None:
        enter_portable(portable)
    else:
        _enter_recorded_level(golden)
    opts.bound_loading()
    if is_predictions(golden):
        raise typer.Exit(_verify_predictions(golden, model, shards))
    console = consoles(json_path)
    check_report_paths(json_path, html_path, inputs=(golden,))
    # Which model is loaded, for a person watching; logs and CI get the report (and one error line).
    announce = (lambda m: print(f"samebits verify: {m}", file=sys.stderr)) if sys.stderr.isatty() else None
    report = verify(golden, model, exact=exact, atol=atol, rtol=rtol, announce=announce, layout=layout, device=device)
    data = report.to_dict()
    write_json(data, json_path, inputs=(golden,))
    write_html(data, html_path, inputs=(golden,))
    bad = [c for c in report.items if c.verdict != "identical"]
    when = report.recorded.get("created") or "?"
    if report.verdict == "identical":
        console.print(
            f"[green]identical[/]: all {len(report.items)} outputs have the recorded bits ({escape(report.golden)}, recorded {when})"
        )
    else:
        console.print(
            f"[{STYLE[report.verdict]}]{report.verdict}[/]: {len(bad)} of {len(report.items)} outputs differ from {escape(report.golden)} (recorded {when})"
        )
    console.print(f"comparison: {report.policy} ({escape(report.policy_reason)})")
    if report.weights_changed:
        names = ", ".join(report.weights_changed[:8]) + (" ..." if len(report.weights_changed) > 8 else "")
        console.print(
            f"[bold]the weights changed since recording[/bold]: {len(report.weights_changed)} tensors ({escape(names)})"
        )
    if bad:
        table = Table("output", "verdict", box=None)
        for c in report.items:
            table.add_row(escape(c.path or "<output>"), f"[{STYLE[c.verdict]}]{c.verdict}[/]")
        console.print(table)
        for c in bad:
            console.print(f"\n[bold]{escape(c.path or '<output>')}[/bold]\n{escape(c.message())}")
        if report.first_module:
            console.print(
                f"\nfirst module whose output changed since recording: [bold]{escape(report.first_module)}[/bold]"
            )
    if report.layouts:
        console.print("\nre-laid in memory:")
        for t in report.layouts:
            note = f": {t.note}" if t.note else ""
            verdict = f"[{STYLE.get(t.verdict, 'dim')}]{t.verdict}[/]"
            console.print(f"- {escape(t.name)}: {verdict}{escape(note)} ({escape(t.what)})")
    causes = report.likely_causes()
    if causes:
        console.print("\nthis machine differs from the recording in:")
        for line in causes:
            console.print(f"- {escape(line)}")
    raise typer.Exit(report.exit_code)


def _enter_recorded_level(golden: str) -> None:
    """Verify under the portable level the golden (or predict run) was recorded under, where this
    CPU and process can; otherwise say why the comparison falls back to tolerances."""
    from samebits.files import read_json
    from samebits.golden.format import read_golden
    from samebits.offline.run import MANIFEST
    from samebits.offline.verify import is_predictions

    try:
        if is_predictions(golden):
            fingerprint = read_json(Path(golden) / MANIFEST)["fingerprint"]
        else:
            fingerprint = read_golden(golden).header["fingerprint"]
        recorded = (fingerprint.get("cpu") or {}).get("portable")
    except Exception:
        return  # verify says what is wrong with the file
    if not isinstance(recorded, str):
        return
    try:
        enter_portable(recorded, why=f"the golden was recorded under portable level {recorded}: verifying under it")
    except UserError as exc:
        print(f"samebits verify: note: {exc}; comparing without the level", file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
