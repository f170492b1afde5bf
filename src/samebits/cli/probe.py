"""``samebits probe URL``: does a running endpoint answer the same alone, under load, across
replicas and across a restart?"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from samebits.cli import inputs as opts
from samebits.cli.output import consoles, fitted_table, is_html_report, replaceable, write_html, write_json
from samebits.cli.progress import Progress
from samebits.errors import UserError
from samebits.probe.options import ProbeOptions

D = ProbeOptions()  # the library's defaults, declared once
STYLE = {"identical": "green", "diverged": "bold red", "skipped": "dim", "error": "magenta"}


def probe_command(
    url: str = typer.Argument(
        ...,
        metavar="URL",
        help="http://HOST:PORT/v2/models/NAME (v2 REST), grpc://HOST:PORT/v2/models/NAME (v2 gRPC), or http://HOST:PORT/v1/completions or /v1/chat/completions (OpenAI).",
    ),
    protocol: Optional[str] = typer.Option(
        None, "--protocol", metavar="v2|v2-grpc|openai", help="The protocol [default: from the URL]."
    ),
    binary: bool = typer.Option(False, "--binary", help="v2 REST: send and ask for tensors in the binary extension."),
    inputs: Optional[str] = typer.Option(
        None,
        "--inputs",
        metavar="FILE",
        help="Probe inputs: rows of a .pt, .npy or .safetensors file (OpenAI: a text file, one prompt per line) [default: random rows of the served shapes, from the server's metadata].",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", metavar="MODEL", help="Probe inputs: rows of MODEL's example inputs (as check loads them)."
    ),
    concurrency: str = typer.Option(
        ",".join(map(str, D.concurrency)), "--concurrency", help="Requests in flight on the loaded axis, per level."
    ),
    requests: int = typer.Option(
        D.requests, "--requests", help="Requests per concurrency level, probe inputs and filler."
    ),
    probes: int = typer.Option(D.probes, "--probes", help="Probe inputs at most."),
    replicas: Optional[list[str]] = typer.Option(
        None, "--replicas", metavar="URL", help="Another replica of the same model (repeat it)."
    ),
    connections: int = typer.Option(
        D.connections,
        "--connections",
        help="Without --replicas: fresh connections to URL on the replica axis (behind a load balancer each may reach another replica).",
    ),
    restart_cmd: Optional[str] = typer.Option(
        None,
        "--restart-cmd",
        metavar="CMD",
        help="Your command that restarts the server (run with sh -c); then the inputs again.",
    ),
    restart_wait_s: float = typer.Option(
        D.restart_wait_s, "--restart-wait-s", help="After --restart-cmd: seconds the endpoint may take to answer."
    ),
    timeout_s: float = typer.Option(D.timeout_s, "--timeout-s", help="Seconds the whole probe may take."),
    request_timeout_s: float = typer.Option(
        D.request_timeout_s, "--request-timeout-s", help="Seconds one request may take."
    ),
    seed: int = typer.Option(D.seed, "--seed", help="Seed of random inputs, the filler and OpenAI's seed field."),
    int_range: str = typer.Option(
        ",".join(map(str, D.int_range)),
        "--int-range",
        metavar="LOW,HIGH",
        help="Integer inputs from metadata: this range, HIGH exclusive.",
    ),
    client: str = typer.Option(
        D.client, "--client", help="The filler's client: auto (wrk where installed), wrk or python."
    ),
    model_name: Optional[str] = typer.Option(
        None, "--model-name", help="OpenAI: the request's model field [default: the first of GET /v1/models]."
    ),
    max_tokens: int = typer.Option(D.max_tokens, "--max-tokens", help="OpenAI: tokens per completion."),
    json_path: Optional[str] = opts.JsonOpt,
    html_path: Optional[str] = opts.HtmlOpt,
) -> None:
    """Ask a running endpoint whether its answers depend on load, replica or restart.

    Each probe input is sent alone twice (quiet), then inside concurrent traffic of other inputs
    at each --concurrency (loaded), then to each replica or fresh connection (replicas), and
    after --restart-cmd (restart); every answer is compared bit for bit with the input's first
    quiet answer (the raw bytes of each output tensor; OpenAI: text, tokens and logprobs).

    Exit 0 when every axis is identical, 1 when one diverged, 2 when the endpoint could not be
    asked (a bad URL, refused or closed connections, 5xx, a protocol mismatch) or an axis failed.
    """
    from samebits.cli.inputs import parse_ints
    from samebits.probe.run import probe

    console = consoles(json_path)
    if json_path not in (None, "-"):
        from samebits.cli.output import is_json_report

        replaceable(Path(json_path), "--json", is_json_report)
    if html_path is not None:
        if Path(html_path).is_dir():
            raise UserError(f"--html {html_path} is a directory; give a file path")
        replaceable(Path(html_path), "--html", is_html_report)
    try:
        low, high = (int(p) for p in int_range.split(","))
    except ValueError:
        raise UserError(f"--int-range '{int_range}' must be LOW,HIGH, e.g. 0,10") from None
    options = ProbeOptions(
        protocol=protocol,
        binary=binary,
        concurrency=parse_ints(concurrency, "--concurrency") or D.concurrency,
        requests=requests,
        probes=probes,
        replicas=tuple(replicas or ()),
        connections=connections,
        restart_cmd=restart_cmd,
        restart_wait_s=restart_wait_s,
        timeout_s=timeout_s,
        request_timeout_s=request_timeout_s,
        seed=seed,
        int_range=(low, high),
        client=client,
        model_name=model_name,
        max_tokens=max_tokens,
    )
    if model is not None:
        opts.bound_loading(timeout_s)
    with Progress("probing") as progress:
        report = probe(url, options, inputs=inputs, model=model, progress=progress.update)
    data = report.to_dict()
    write_json(data, json_path)
    write_html(data, html_path)
    render(console, report)
    raise typer.Exit(report.exit_code)


def render(console: Console, report) -> None:  # report: ProbeReport
    console.print(f"[bold]{escape(report.headline())}[/bold]")
    console.print(
        f"URL {escape(report.url)} ({report.protocol}), {escape(report.inputs)}; answers compared by "
        f"{escape(', '.join(report.outputs))}; load from {report.filler}, {report.seconds:.1f} s\n"
    )
    rows = [
        [
            a.axis,
            f"[{STYLE[a.verdict]}]{a.verdict}[/]",
            f"{a.agreed}/{a.runs}" if a.runs else "",
            escape(a.summary if a.verdict in ("identical", "diverged") else a.reason or a.summary),
        ]
        for a in report.axes
    ]
    console.print(fitted_table(["axis", "verdict", "agreed", "what was measured"], rows, {2}, console.width))
    loaded = next((a for a in report.axes if a.axis == "loaded" and a.cells), None)
    if loaded is not None:
        cells = [
            [
                str(c.concurrency),
                str(c.sent),
                f"{c.rate:.0f}",
                f"{c.differing}/{c.probe_answers}",
                str(sum(c.failed.values())),
                f"{c.client_cpu_ms_per_request:.3f}" if c.client_cpu_ms_per_request is not None else "",
                c.client,
            ]
            for c in loaded.cells
        ]
        head = [
            "concurrency",
            "requests",
            "req/s",
            "probe answers differing",
            "failed",
            "client CPU ms/request",
            "load client",
        ]
        console.print()
        console.print(fitted_table(head, cells, {0, 1, 2, 3, 4, 5}, console.width))
    for a in report.axes:
        if a.verdict == "diverged" and a.first is not None:
            console.print(f"\n[bold]{a.axis}[/bold]: first at {escape(a.first[0])}: {escape(a.first[1].line())}")
            if a.starts_at is not None:
                console.print(f"answers start to differ at concurrency {a.starts_at}")


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_command)
