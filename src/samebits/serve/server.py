"""Run the server: build the Predictor (calibrated before the port opens, so the server is ready
when it listens), then uvicorn, and (``--grpc-port``) the gRPC service beside it in the same event
loop, over the same batcher. samebits owns SIGTERM and SIGINT: new requests get 503 (gRPC:
UNAVAILABLE), queued and running ones are answered, then the process exits 0 (uvicorn alone
re-raises the signal)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import re
import signal
from collections.abc import Callable, Coroutine, Hashable, Iterator
from typing import TYPE_CHECKING, Any

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Runner
from samebits.serve.options import ServeOptions
from samebits.models.target import ModelOrSpec

if TYPE_CHECKING:
    from fastapi import FastAPI

    from samebits.models.spec import LoadedModel
    from samebits.serve.padding import BucketedPredictor
    from samebits.serve.signature import Signature, TensorSpec


def model_name(spec: str) -> str:
    """A URL-safe name from a MODEL spec: ``demo:mlp`` -> ``mlp``, ``models.py:resnet18`` -> ``resnet18``."""
    tail = re.split(r"[:/\\]", spec.rstrip("/\\"))[-1]
    tail = re.sub(r"\.(py|pt|pt2|onnx)$", "", tail)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tail) or "model"


@dataclasses.dataclass
class Served:
    """One model ready to serve: its URL name, the calibrated runner, the request signature,
    and (``--pad``) the key that batches only requests padded to the same length."""

    name: str
    runner: Runner
    signature: Signature
    key: Callable[[ModelInputs], Hashable] | None = None


def served(model_or_spec: ModelOrSpec, inputs: object, options: ServeOptions, cache_dir: str | None = None) -> Served:
    """What ``samebits serve``, its isolated worker and each Ray replica run. A model that cannot
    be served closes its Predictor and raises."""
    from samebits.models.target import as_loaded, inputs_for
    from samebits.runtime.predictor import Predictor
    from samebits.serve.signature import signature_of

    loaded = as_loaded(model_or_spec)
    example = inputs_for(loaded, inputs, hint="samebits serve needs example inputs to calibrate")
    if options.threads:  # before the calibration: the verified sizes hold at this thread count
        import torch

        from samebits.limits import thread_count

        torch.set_num_threads(thread_count(options.threads, "--threads"))
    name = options.name or model_name(loaded.spec)
    if options.pad:
        bucketed, signature = _served_padded(loaded, example, options, cache_dir)
        return Served(name, bucketed, signature, bucketed.key)
    predictor = Predictor(
        loaded,
        device=options.device,
        backend=options.backend,
        max_batch_size=options.max_batch_size,
        example_inputs=example,
        cache_dir=cache_dir,
    )
    try:
        signature = signature_of(predictor.model, predictor.example, predictor.predict(predictor.example))
    except Exception:
        predictor.close()
        raise
    return Served(name, predictor, signature)


def _served_padded(
    loaded: LoadedModel, example: ModelInputs, options: ServeOptions, cache_dir: str | None
) -> tuple[BucketedPredictor, Signature]:
    """(BucketedPredictor, signature) for variable-length inputs: a Predictor per bucket length;
    the outputs whose size follows the length are found by running two lengths."""
    from samebits.measure.guard import check_forward
    from samebits.runtime.predictor import Predictor
    from samebits.serve.padding import BucketedPredictor, Buckets, parse_pad
    from samebits.serve.signature import argument_names, signature_of

    buckets = Buckets([parse_pad(p) for p in options.pad], list(options.pad_lengths))
    names = argument_names(loaded.model, len(example.args)) + list(example.kwargs)
    buckets.check(names)
    predictors: dict[int, Predictor] = {}
    try:
        for length in buckets.lengths:
            predictors[length] = Predictor(
                loaded,
                device=options.device,
                backend=options.backend,
                max_batch_size=options.max_batch_size,
                example_inputs=buckets.example_at(example, names, length),
                cache_dir=cache_dir,
            )
        first = predictors[buckets.lengths[0]]
        base = signature_of(first.model, first.example, first.predict(first.example))
        other = max(1, buckets.lengths[0] - 1) if buckets.lengths[0] > 1 else 2
        shifted = buckets.example_at(example, names, other)
        moved = signature_of(first.model, shifted, check_forward(first.model, shifted))
    except Exception:
        for p in predictors.values():
            p.close()
        raise
    crop = {
        a.name: [i + 1 for i, (x, y) in enumerate(zip(a.row_shape, b.row_shape)) if x != y]
        for a, b in zip(base.outputs, moved.outputs)
    }
    inputs = [_variable(s, [buckets.pads[s.name].dim] if s.name in buckets.pads else []) for s in base.inputs]
    outputs = [_variable(s, crop[s.name]) for s in base.outputs]
    signature = dataclasses.replace(
        base, inputs=inputs, outputs=outputs, buckets=buckets, crop={k: v for k, v in crop.items() if v}
    )
    return BucketedPredictor(predictors, buckets, names), signature


def _variable(spec: TensorSpec, dims: list[int]) -> TensorSpec:
    """``spec`` with ``-1`` at ``dims`` (counted with the batch dim) of its row shape."""
    return dataclasses.replace(spec, row_shape=tuple(-1 if i + 1 in dims else d for i, d in enumerate(spec.row_shape)))


def build(
    model_or_spec: ModelOrSpec, inputs: object = None, options: ServeOptions = ServeOptions()
) -> tuple[FastAPI, Runner, Signature]:
    """(app, runner, signature) for a model: the Predictor is created and calibrated here (with
    ``options.isolate``, in a child process that a hung forward gets replaced)."""
    from samebits.measure.prepare import check_device
    from samebits.serve.app import create_app

    check_device(options.device)  # one line before any work
    if options.isolate:
        from samebits.models.spec import LoadedModel
        from samebits.serve.isolated import IsolatedPredictor

        if options.pad:
            raise UserError("--isolate does not take --pad yet; serve variable-length inputs without --isolate")
        spec = ""
        if isinstance(model_or_spec, str):
            spec = model_or_spec
        elif isinstance(model_or_spec, LoadedModel) and not model_or_spec.in_memory:
            spec = model_or_spec.spec
        if inputs is not None or not spec or spec.startswith("<"):
            raise UserError(
                "--isolate loads MODEL in a fresh process with its own example inputs: pass a MODEL spec, "
                "without --input or --input-shape"
            )
        isolated = IsolatedPredictor(spec, options)
        name = options.name or model_name(spec)
        app = create_app(
            isolated, isolated.signature, name=name, options=options, not_ready=isolated.not_ready, restartable=isolated
        )
        return app, isolated, isolated.signature

    one = served(model_or_spec, inputs, options)
    not_ready = None
    if options.golden is not None:
        from samebits.serve.selfcheck import golden_mismatch

        not_ready = golden_mismatch(one.runner.predict, options.backend, options.golden)
    app = create_app(one.runner, one.signature, name=one.name, options=options, not_ready=not_ready, key=one.key)
    return app, one.runner, one.signature


def run_loop(main: Coroutine[Any, Any, None], fast: bool) -> None:
    """``main`` to the end on uvloop where installed and ``fast`` (not beside grpc.aio, which
    runs on asyncio's own loop), else on asyncio's loop."""
    if fast:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            if hasattr(uvloop, "run"):  # uvloop >= 0.18
                uvloop.run(main)
                return
    asyncio.run(main)


def serve(app: FastAPI, options: ServeOptions = ServeOptions(), on_ready: Callable[[int], None] | None = None) -> None:
    """Serve ``app`` until SIGTERM or SIGINT, then drain and return. ``on_ready(port)`` is called
    once the port is open (the bound port, also for ``port=0``). With ``options.grpc_port``, the
    gRPC service is bound before and started with uvicorn (its bound port in
    ``app.state.grpc_port`` by then), and stopped after the batcher drained."""
    import uvicorn

    from samebits.serve.app import added_middleware, front

    if options.grpc_port is not None and added_middleware(app):
        raise UserError(
            "grpc_port cannot be served beside middleware added to the app (authentication, CORS, limits): gRPC "
            "calls do not pass through HTTP middleware and would bypass it; leave grpc_port out, or serve gRPC "
            "from an app without added middleware"
        )
    grpc: Any = None  # the grpc.aio server (--grpc-port), bound in main()
    app.state.grpc_port = None

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # samebits installs its own handlers below

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)  # the app's lifespan has started the batcher
            if self.started and grpc is not None:
                await grpc.start()
            # Everything loaded so far (torch, the model, the app) lives as long as the server:
            # out of the collector's sight, a full collection no longer walks it mid-request
            gc.freeze()
            if self.started and on_ready is not None:
                on_ready(self.servers[0].sockets[0].getsockname()[1] if self.servers else options.port)

    config = uvicorn.Config(
        front(app), host=options.host, port=options.port, log_level="warning", access_log=False, lifespan="on"
    )
    server = Server(config)

    async def main() -> None:
        nonlocal grpc
        loop = asyncio.get_running_loop()
        if options.grpc_port is not None:  # bound first: a port in use is one line before REST opens
            from samebits.serve.grpc_service import create_server

            grpc, app.state.grpc_port = create_server(app, options)
        try:
            await run(loop)
        finally:
            if grpc is not None:
                await grpc.stop(None)  # at once where serving ended otherwise (no-op after a drain)

    async def run(loop: asyncio.AbstractEventLoop) -> None:
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        task = loop.create_task(server.serve())
        waiter = loop.create_task(stopping.wait())
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            waiter.cancel()
            task.result()
            return
        # New requests get 503; queued and running ones finish, within a bound: a forward stuck
        # in the worker thread answered its requests with 503 already and is not waited for.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(app.state.service.batcher.drain(), options.forward_timeout_s + options.timeout_s + 5)
        if grpc is not None:  # calls answered by the drain send their answers; new ones are refused
            from samebits.serve.grpc_service import STOP_GRACE_S

            await grpc.stop(STOP_GRACE_S)
        server.should_exit = True
        await task

    try:
        run_loop(main(), fast=options.grpc_port is None)
    except OSError as exc:
        raise UserError(f"cannot serve on {options.host}:{options.port}: {exc.strerror or exc}") from None
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind (the error is logged above)
        if exc.code not in (0, None):
            raise UserError(f"cannot serve on {options.host}:{options.port} (is the port in use?)") from None
        raise
