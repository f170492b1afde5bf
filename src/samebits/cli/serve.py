"""``samebits serve``: a dynamic-batching inference server whose answers do not depend on load."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from samebits.cli.portable import PortableOpt, enter as enter_portable
from samebits.cli import inputs as opts
from samebits.errors import UserError
from samebits.limits import batch_rows
from samebits.serve.options import ServeOptions

D = ServeOptions()  # the library's defaults, declared once


def serve_command(
    model: str = opts.ModelArg,
    input_file: Optional[str] = opts.InputOpt,
    input_shape: Optional[list[str]] = opts.ShapeOpt,
    dtype: Optional[list[str]] = opts.DtypeOpt,
    int_range: Optional[str] = opts.IntRangeOpt,
    host: str = typer.Option(D.host, "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(D.port, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    grpc_port: Optional[int] = typer.Option(
        None,
        "--grpc-port",
        min=0,
        max=65535,
        help="Also serve the protocol over gRPC on this port, as Triton does, through the same batcher (0: any free port).",
    ),
    backend: str = typer.Option(
        D.backend,
        "--backend",
        help="Predictor backend (eager, torchscript, export, onnxruntime, ...; auto: the fastest measured here among those with eager's bits).",
    ),
    max_batch_size: int = typer.Option(D.max_batch_size, "--max-batch-size", min=1, help="Rows per forward at most."),
    max_wait_ms: float = typer.Option(
        D.max_wait_ms,
        "--max-wait-ms",
        min=0,
        help="Extra wait for rows while the worker was busy (an idle one never waits).",
    ),
    max_queue: int = typer.Option(D.max_queue, "--max-queue", min=1, help="Rows queued before new requests get 503."),
    timeout_s: float = typer.Option(
        D.timeout_s, "--timeout-s", min=0, help="A request still queued after this gets 504."
    ),
    forward_timeout_s: float = typer.Option(
        D.forward_timeout_s,
        "--forward-timeout-s",
        min=0,
        help="A forward past this: its requests get 503 and the server is not ready until it returns.",
    ),
    max_body_mb: float = typer.Option(D.max_body_mb, "--max-body-mb", min=0, help="Larger request bodies get 413."),
    max_json_mb: float = typer.Option(
        D.max_json_mb,
        "--max-json-mb",
        min=0,
        help="A larger JSON part gets 413: parsed JSON holds up to ~15x its text; send large tensors in binary.",
    ),
    name: Optional[str] = typer.Option(None, "--name", help="The model's name in the URLs [default: from MODEL]."),
    golden: Optional[str] = typer.Option(
        None,
        "--golden",
        metavar="FILE",
        help="Ready only if this process reproduces FILE's bits (record it with --runtime predictor[:BACKEND]).",
    ),
    pad: Optional[list[str]] = typer.Option(
        None,
        "--pad",
        metavar="NAME:DIM[=VALUE]",
        help="An input of variable length along DIM (input_ids:1), padded with VALUE (0) to a --pad-lengths bucket. Repeat for each.",
    ),
    pad_lengths: str = typer.Option(
        ",".join(map(str, D.pad_lengths)), "--pad-lengths", help="The bucket lengths; each calibrated once."
    ),
    threads: Optional[int] = typer.Option(
        None,
        "--threads",
        min=1,
        help="The model's intra-op threads, set before calibration [default: every core]. Fewer leave cores for the HTTP stack.",
    ),
    device: str = opts.DeviceOpt,
    isolate: bool = typer.Option(
        False,
        "--isolate",
        help="Run the model in a child process: a forward past --forward-timeout-s kills it and a new one starts.",
    ),
    portable: Optional[str] = PortableOpt,
) -> None:
    """Serve MODEL over HTTP with dynamic batching; every answer has the bits of the sample run alone.

    Speaks the Open Inference Protocol (KServe v2 REST: /v2/health/ready, /v2/models/NAME,
    POST /v2/models/NAME/infer with JSON or binary tensors; with --grpc-port also its gRPC
    service), so Triton and KServe clients work.
    Requests are batched through one samebits.Predictor, which runs only batch sizes it has
    verified. /metrics serves Prometheus text; /docs the OpenAPI schema. SIGTERM drains the
    requests in flight and exits 0.
    """
    enter_portable(portable)
    from samebits.errors import require

    for package in ("fastapi", "uvicorn"):
        require(package, "samebits serve", "serve")
    if grpc_port is not None:
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # before gRPC's import (see grpc_service)
        for package in ("grpc", "google.protobuf"):
            require(package, "samebits serve --grpc-port", "serve")
    from samebits.serve.server import build, serve

    options = ServeOptions(
        host=host,
        port=port,
        grpc_port=grpc_port,
        backend=backend,
        max_batch_size=max_batch_size,
        max_wait_ms=max_wait_ms,
        max_queue=max_queue,
        timeout_s=timeout_s,
        forward_timeout_s=forward_timeout_s,
        max_body_mb=max_body_mb,
        max_json_mb=max_json_mb,
        name=name,
        golden=golden,
        isolate=isolate,
        pad=tuple(pad or ()),
        pad_lengths=opts.parse_ints(pad_lengths, "--pad-lengths") or D.pad_lengths,
        threads=threads,
        device=device,
    )
    opts.bound_loading()
    batch_rows(max_batch_size, "--max-batch-size")
    from samebits.measure.prepare import check_device

    check_device(device)  # before anything is loaded or calibrated
    for flag, wanted in (("--port", port), ("--grpc-port", grpc_port)):
        _free_or_refused(host, wanted, flag)
    if isolate:
        if input_file or input_shape or dtype or int_range:
            raise UserError(
                "--isolate serves MODEL with its own example inputs; drop --input, --input-shape and --dtype"
            )
        typer.echo(f"calibrating {model} in a worker process ...", err=True)
        app, runner, _ = build(model, None, options)
    else:
        loaded, inputs, model_dtype = opts.load_target(model, input_file, input_shape, dtype, int_range, 0)
        if model_dtype is not None:
            from samebits.measure.prepare import prepare

            loaded.model, inputs = prepare(loaded.model, inputs, "cpu", model_dtype)
        typer.echo(f"calibrating {loaded.spec} ...", err=True)
        app, runner, _ = build(loaded, inputs, options)

    def announce(bound: int) -> None:
        sizes = ",".join(map(str, runner.plan.sizes)) or "none"
        if app.state.service.not_ready:
            typer.echo(f"NOT READY: {app.state.service.not_ready}", err=True)
        for note in runner.plan.notes:
            typer.echo(f"note: {note}", err=True)
        typer.echo(
            f"serving {app.state.model_name} on http://{host}:{bound} (verified batch sizes {sizes}); "
            f"POST /v2/models/{app.state.model_name}/infer"
            + (f", /v2/models/{app.state.model_name}/generate" if app.state.service.generating is not None else "")
            + (f"; gRPC on {host}:{app.state.grpc_port}" if app.state.grpc_port is not None else ""),
            err=True,
        )

    try:
        serve(app, options, on_ready=announce)
    finally:
        runner.close()
    if app.state.service.batcher.stuck_since is not None:
        # Python cannot end a thread: the forward that hangs in the worker thread would keep the
        # interpreter from exiting (it joins the thread). Its requests were answered (503).
        typer.echo("samebits: a forward was still running past --forward-timeout-s; exiting without it", err=True)
        sys.stderr.flush()
        os._exit(0)


def _free_or_refused(host: str, port: int | None, flag: str) -> None:
    """One line, before a model is loaded or calibrated, where ``port`` cannot be bound on
    ``host`` (in use, or not this machine's address): the server would bind it only after the
    calibration, and then fail with asyncio's tracebacks."""
    import socket

    if not port:
        return  # 0 or None: any free port, or none asked for
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UserError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            probe.bind(address)
        except OSError as exc:
            raise UserError(
                f"cannot serve on {host}:{port} ({flag}): {exc.strerror or exc}; choose another port"
            ) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
