"""The HTTP application (FastAPI): the Open Inference Protocol's endpoints over one
:class:`~samebits.serve.batcher.Batcher`, Prometheus metrics, and errors as ``{"error": "..."}``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from typing import Any, cast

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from samebits._version import __version__
from samebits.errors import first_line
from samebits.fingerprint.diff import bit_relevant_digest
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Restartable, Runner
from samebits.runtime.predictor import Predictor
from samebits.serve.fastpath import ASGIApp, BodyTooLarge, Disconnected, InferShortPath, error_body, read_body
from samebits.serve.batcher import Batcher, Draining, ForwardFailed, QueueFull, Stuck, TimedOut, TooLarge
from samebits.serve.generate import BadGenerate, generate_batcher, parse_generate, supports_generate, vocab_size
from samebits.serve.options import ServeOptions
from samebits.serve.protocol import (
    HEADER_LENGTH,
    ProtocolError,
    TooBig,
    decode_tensor,
    encode_outputs,
    parameters,
    parse_body,
)
from samebits.serve.signature import Signature

# The request body of /infer as the protocol defines it, for the OpenAPI schema (the handler reads
# the raw body itself: the binary extension is not JSON, and errors are 400, not 422).
TENSOR_SCHEMA = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "datatype": {"enum": ["BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64"]},
        "parameters": {"type": "object"},
        "data": {"type": "array"},
    },
}
INFER_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["inputs"],
                    "properties": {
                        "id": {"type": "string"},
                        "parameters": {"type": "object"},
                        "inputs": {"type": "array", "items": TENSOR_SCHEMA},
                        "outputs": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {"name": {"type": "string"}, "parameters": {"type": "object"}},
                            },
                        },
                    },
                }
            }
        },
    }
}


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class Metrics:
    """Prometheus series of one app (its own registry, so apps in one process do not collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("samebits_requests", "Inference requests by status", ["status"], registry=self.registry)
        self.queue = Gauge("samebits_queue_rows", "Rows waiting for the worker", registry=self.registry)
        self.batch = Histogram(
            "samebits_batch_rows",
            "Rows per forward",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=self.registry,
        )
        self.latency = Histogram("samebits_request_seconds", "Request latency", registry=self.registry)


def _rows_of(tensors: dict[str, torch.Tensor], signature: Signature) -> int:
    expected = {s.name: s for s in signature.inputs}
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    if missing or unknown:
        raise ProtocolError(
            f"inputs must be {', '.join(expected)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    rows = set()
    for name, t in tensors.items():
        spec = expected[name]
        if t.dtype != spec.dtype:
            raise ProtocolError(f"input {name} must be {spec.metadata()['datatype']}")
        if t.dim() != len(spec.row_shape) + 1 or any(w not in (-1, g) for w, g in zip(spec.row_shape, t.shape[1:])):
            raise ProtocolError(f"input {name} must have shape {[-1, *spec.row_shape]}, not {list(t.shape)}")
        rows.add(t.shape[0])
    if len(rows) != 1 or 0 in rows:
        raise ProtocolError("every input must hold the same number of rows, at least 1")
    return rows.pop()


def known_outputs(names: list[str], signature: Signature) -> list[str]:
    """``names``, each an output of the model (else :class:`ProtocolError`)."""
    everything = [s.name for s in signature.outputs]
    unknown = [n for n in names if n not in everything]
    if unknown:
        raise ProtocolError(f"unknown output(s) {', '.join(unknown)}; this model gives {', '.join(everything)}")
    return names


def _requested(request: dict[str, Any], signature: Signature) -> tuple[list[str], set[str]]:
    """The output names to answer with, and those to send in binary."""
    everything = [s.name for s in signature.outputs]
    all_binary = bool(parameters(request, "the request").get("binary_data_output", False))
    wanted = request.get("outputs")
    if wanted is None:
        return everything, set(everything) if all_binary else set()
    if not isinstance(wanted, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in wanted):
        raise ProtocolError("'outputs' must be a list of objects with a 'name'")
    names = known_outputs([o["name"] for o in wanted], signature)
    binary = {o["name"] for o in wanted if parameters(o, f"output {o['name']}").get("binary_data", all_binary)}
    return names, binary


async def submitted(batcher: Batcher, inputs: Any) -> Any:
    """The batcher's answer to ``inputs``; its refusals and failures as :class:`HTTPError`."""
    try:
        return await batcher.submit(inputs)
    except TooLarge as exc:
        raise HTTPError(413, str(exc)) from None
    except (QueueFull, Draining, Stuck) as exc:
        raise HTTPError(
            503, f"the queue is full: {exc}" if isinstance(exc, QueueFull) else str(exc), {"Retry-After": "1"}
        ) from None
    except TimedOut as exc:
        raise HTTPError(504, str(exc)) from None
    except ForwardFailed as exc:
        raise HTTPError(500, f"the model's forward failed: {exc}") from None


@dataclasses.dataclass
class Decoded:
    """One infer request read and checked: its tensors (padded to their bucket), the outputs it
    asks for (and which in binary), its id, and its length where inputs are padded."""

    tensors: dict[str, torch.Tensor]
    names: list[str]
    binary_out: set[str]
    request_id: str | None
    length: int


def checked(tensors: dict[str, torch.Tensor], signature: Signature) -> tuple[dict[str, torch.Tensor], int]:
    """A request's named tensors checked against the signature (names, datatypes, row shapes,
    rows, ids), padded to their bucket where inputs are padded: (tensors, length before padding)."""
    _rows_of(tensors, signature)
    signature.check_ids(tensors)
    length = 0
    if signature.buckets is not None:
        try:
            length = signature.buckets.length_of(tensors)
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        tensors = signature.buckets.pad(tensors, signature.buckets.bucket_of(length))
    return tensors, length


def cropped(signature: Signature, output: Any, length: int) -> dict[str, torch.Tensor]:
    """The batcher's answer as named outputs, those that carry a padded length cut back to it."""
    named = signature.named_outputs(output)
    for out_name, dims in signature.crop.items():
        for dim in dims:
            named[out_name] = named[out_name].narrow(dim, 0, length)
    return named


def decode(body: bytes, header_length: str | None, signature: Signature, max_json: int | None = None) -> Decoded:
    """Read one infer request; every problem is a :class:`ProtocolError` (400; 413 for a JSON
    part over ``max_json`` bytes)."""
    parsed, binary = parse_body(body, header_length, max_json)
    specs = parsed.get("inputs")
    if not isinstance(specs, list) or not specs:
        raise ProtocolError("'inputs' must be a non-empty list")
    tensors, offset = {}, 0
    for spec in specs:
        tensor_name, tensor, offset = decode_tensor(spec, binary, offset)
        if tensor_name in tensors:
            raise ProtocolError(f"input {tensor_name} is given twice")
        tensors[tensor_name] = tensor
    if offset != len(binary):
        raise ProtocolError(f"{len(binary) - offset} binary bytes follow the last binary input")
    tensors, length = checked(tensors, signature)
    names, binary_out = _requested(parsed, signature)
    request_id = parsed.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise ProtocolError("'id' must be a string")
    return Decoded(tensors, names, binary_out, request_id, length)


INLINE_BODY = 64 * 1024  # bodies up to this are read on the event loop; larger ones in the parse thread
_PARSE = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samebits-parse")  # one at a time: bounded memory


async def answer(
    body: bytes,
    header_length: str | None,
    signature: Signature,
    batcher: Batcher,
    name: str,
    max_json: int | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One infer request, start to end: (status, headers, body). Raises :class:`HTTPError`. A
    large body is parsed off the event loop (which goes on answering), one at a time."""
    try:
        if len(body) <= INLINE_BODY:
            request = decode(body, header_length, signature, max_json)
        else:
            loop = asyncio.get_running_loop()
            request = await loop.run_in_executor(_PARSE, decode, body, header_length, signature, max_json)
    except TooBig as exc:
        raise HTTPError(413, str(exc)) from None
    except ProtocolError as exc:
        raise HTTPError(400, str(exc)) from None
    named = cropped(signature, await submitted(batcher, signature.arguments(request.tensors)), request.length)
    entries, chunks = encode_outputs({n: named[n] for n in request.names}, request.binary_out)
    reply: dict[str, Any] = {"model_name": name, "model_version": "1", "outputs": entries}
    if request.request_id is not None:
        reply["id"] = request.request_id
    head = json.dumps(reply).encode()
    if not chunks:
        return 200, {"Content-Type": "application/json"}, head
    return 200, {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(head))}, head + b"".join(chunks)


def create_app(
    runner: Runner,
    signature: Signature,
    *,
    name: str,
    options: ServeOptions = ServeOptions(),
    not_ready: str | None = None,
    restartable: Restartable | None = None,
    key: Callable[[ModelInputs], Hashable] | None = None,
) -> FastAPI:
    """The server for one runner (a Predictor). Mount it into an existing app, or run it with
    :func:`samebits.serve.server.serve`. ``not_ready``: why it must never report ready (the
    ``--golden`` self-check failed); it still answers, so the difference can be inspected.
    ``restartable``: the runner's process, replaced after a forward hangs (``--isolate``);
    ``key``: requests are batched only with requests of the same key (``--pad``'s lengths)."""
    metrics = Metrics()
    batcher = Batcher.for_runner(
        runner, options, on_batch=lambda rows, seconds: metrics.batch.observe(rows), worker=restartable, key=key
    )
    generator = runner if isinstance(runner, Predictor) and supports_generate(runner.model) else None
    generating = generate_batcher(generator, options) if generator is not None else None
    vocab = vocab_size(generator.model) if generator is not None else None
    limit = int(options.max_body_mb * 1024 * 1024)
    max_json = int(options.max_json_mb * 1024 * 1024)
    model_metadata = {
        "name": name,
        "versions": ["1"],
        "platform": "pytorch",
        "inputs": [s.metadata() for s in signature.inputs],
        "outputs": [s.metadata() for s in signature.outputs],
        "parameters": {
            "samebits": {
                **runner.plan.describe(),
                "notes": list(runner.plan.notes),  # e.g. what a lone request's padding costs
                "max_batch_size": options.max_batch_size,
                # the bit-relevant digest, as in a predict manifest: equal where the bits are
                "fingerprint_sha256": bit_relevant_digest(runner.fingerprint),
                "generate": generating is not None,  # POST /v2/models/{name}/generate
            }
        },
    }

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        if generating is not None:
            await generating.start()
        yield
        await batcher.close()
        if generating is not None:
            await generating.close()

    extensions = ["binary_tensor_data", *(["generate"] if generating is not None else [])]
    app = FastAPI(title="samebits serve", version=__version__, lifespan=lifespan)
    app.state.batcher = batcher
    app.state.model_name = name
    app.state.not_ready = not_ready
    app.state.generates = generating is not None
    # what samebits.serve.grpc_service answers from, so both protocols say the same
    app.state.signature = signature
    app.state.model_metadata = model_metadata
    app.state.server_metadata = {"name": "samebits", "version": __version__, "extensions": extensions}
    app.state.metrics = metrics

    @app.exception_handler(HTTPError)
    async def _error(request: Request, exc: HTTPError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        """Anything else is samebits' bug: still an answer in the protocol's shape."""
        return JSONResponse({"error": f"internal error: {first_line(exc, with_type=True)}"}, status_code=500)

    def ready() -> bool:
        return (
            not batcher.draining
            and not_ready is None
            and batcher.stuck_since is None
            and not batcher.restarting
            and batcher.broken is None
        )

    def checked_ready() -> bool:
        """Readiness as /v2/health/ready answers it (a dead worker process is restarted first)."""
        batcher.watch_worker()
        return ready()

    app.state.ready = checked_ready

    def readiness(body: dict[str, Any]) -> JSONResponse:
        batcher.watch_worker()
        if batcher.broken is not None:
            body["reason"] = batcher.broken
        elif batcher.restarting:
            body["reason"] = f"restarting the model's worker process {batcher.restart_reason}"
        elif batcher.stuck_since is not None:
            body["reason"] = f"a forward has been running for {time.monotonic() - batcher.stuck_since:.0f} s"
        elif not ready():
            body["reason"] = "shutting down" if batcher.draining else not_ready
        return JSONResponse({**body, "ready": ready()}, status_code=200 if ready() else 503)

    def known(model_name: str) -> None:
        if model_name != name:
            raise HTTPError(404, f"unknown model {model_name!r}; this server serves {name!r}")

    @app.get("/v2")
    async def server_metadata() -> dict[str, Any]:
        return dict(app.state.server_metadata)

    @app.get("/v2/health/live")
    async def live() -> dict[str, bool]:
        return {"live": True}

    @app.get("/v2/health/ready")
    async def server_ready() -> JSONResponse:
        return readiness({})

    @app.get("/v2/models/{model_name}")
    async def metadata(model_name: str) -> dict[str, Any]:
        known(model_name)
        return model_metadata

    @app.get("/v2/models/{model_name}/ready")
    async def model_ready(model_name: str) -> JSONResponse:
        known(model_name)
        return readiness({"name": name})

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.queue.set(batcher.queued_rows)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        """The request counted by its status and timed, for /metrics."""
        started, status = time.monotonic(), 200
        try:
            yield
        except HTTPError as exc:
            status = exc.status
            raise
        except Exception:
            status = 500
            raise
        finally:
            metrics.requests.labels(str(status)).inc()
            metrics.latency.observe(time.monotonic() - started)

    # POST here is answered by InferShortPath (below) before routing; the route stays for the
    # OpenAPI schema and answers the same where the short path is bypassed
    @app.post("/v2/models/{model_name}/infer", openapi_extra=INFER_SCHEMA)
    async def infer(model_name: str, request: Request) -> Response:
        with counted():
            known(model_name)
            return await _infer(request)

    async def _body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, f"the body is {int(declared)} bytes; the limit is {limit} (--max-body-mb)")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPError(413, f"the body is over {limit} bytes (--max-body-mb)")
            chunks.append(chunk)
        return b"".join(chunks)

    @app.post("/v2/models/{model_name}/generate")
    async def generate(model_name: str, request: Request) -> Response:
        """Greedy generation: ``{"input_ids": [...], "parameters": {"max_new_tokens": N}}`` ->
        ``{"output_ids": [...]}``, the tokens this prompt gets alone, whatever the load."""
        with counted():
            known(model_name)
            if generating is None:
                raise HTTPError(404, "this model has no transformers-style generate(): only /infer is served")
            try:
                inputs, request_id = parse_generate(await _body(request), vocab, generator.model if generator else None)
            except BadGenerate as exc:
                raise HTTPError(400, str(exc)) from None
            (tokens,) = await submitted(generating, inputs)
            reply: dict[str, Any] = {"model_name": name, "model_version": "1", "output_ids": tokens.tolist()}
            if request_id is not None:
                reply["id"] = request_id
            return JSONResponse(reply)

    async def _infer(request: Request) -> Response:
        body = await _body(request)
        status, headers, payload = await answer(
            body, request.headers.get(HEADER_LENGTH.lower()), signature, batcher, name, max_json
        )
        return Response(payload, status_code=status, headers=headers)

    async def infer_short(receive: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """``infer`` without FastAPI's routing and request objects (the same answers)."""
        started, status = time.monotonic(), 200
        try:
            declared = headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise HTTPError(413, f"the body is {int(declared)} bytes; the limit is {limit} (--max-body-mb)")
            try:
                body = await read_body(receive, limit)
            except BodyTooLarge:
                raise HTTPError(413, f"the body is over {limit} bytes (--max-body-mb)") from None
            return await answer(body, headers.get(HEADER_LENGTH.lower()), signature, batcher, name, max_json)
        except Disconnected:
            status = -1
            return status, {}, b""
        except HTTPError as exc:
            status = exc.status
            return status, {"Content-Type": "application/json", **exc.headers}, error_body(str(exc))
        except Exception as exc:  # samebits' bug, answered in the protocol's shape (as _bug does)
            status = 500
            body = error_body(f"internal error: {first_line(exc, with_type=True)}")
            return status, {"Content-Type": "application/json"}, body
        finally:
            if status >= 0:
                metrics.requests.labels(str(status)).inc()
                metrics.latency.observe(time.monotonic() - started)

    # Inside FastAPI where the app is mounted into another; in front of all of it (FastAPI's own
    # middleware: telemetry, body limit, error pages) where samebits runs the server (front())
    path = f"/v2/models/{name}/infer"
    app.add_middleware(InferShortPath, path=path, handle=infer_short)
    app.state.asgi = InferShortPath(cast(ASGIApp, app), path, infer_short)
    app.state.asgi_middleware = tuple(app.user_middleware)
    return app


def added_middleware(app: FastAPI) -> bool:
    """Whether middleware was added to ``app`` since :func:`create_app` made it (authentication,
    CORS, limits), which every request must pass through."""
    return tuple(app.user_middleware) != getattr(app.state, "asgi_middleware", None)


def front(app: FastAPI) -> Any:
    """The ASGI app to serve: :func:`create_app`'s infer short path in front of FastAPI, unless
    middleware was added to ``app`` since, then ``app`` itself, whose short path answers inside
    that middleware."""
    asgi = getattr(app.state, "asgi", None)
    return app if asgi is None or added_middleware(app) else asgi
