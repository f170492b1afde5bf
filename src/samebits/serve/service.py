"""One served model, whatever speaks for it: the batcher built once from the runner's plan facts
(``Batcher.for_runner``: a model whose rows are coupled never has requests joined), readiness,
the metadata both protocols answer, the metrics, and the one infer pipeline (checked tensors ->
the batcher -> named outputs cut back to their length). REST's routes and short path
(:mod:`samebits.serve.app`), gRPC (:mod:`samebits.serve.grpc_service`) and a Ray replica
(:mod:`samebits.serve.ray`) all call it; every failure is a :class:`ServiceError` that carries
its HTTP status and its gRPC code."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import torch
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from samebits._version import __version__
from samebits.errors import first_line
from samebits.fingerprint.diff import bit_relevant_digest
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Restartable, Runner
from samebits.runtime.predictor import Predictor
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


class ServiceError(Exception):
    """A request answered with an error: its HTTP status, the gRPC code that stands for it (a
    ``grpc.StatusCode`` name), headers for REST, and one line."""

    def __init__(self, status: int, message: str, grpc_code: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.grpc_code, self.headers = status, grpc_code, headers or {}


def service_error(exc: BaseException) -> ServiceError:
    """``exc`` as the service answers it (the one table of both protocols); anything unforeseen
    is samebits' bug: 500, INTERNAL, one line."""
    if isinstance(exc, ServiceError):
        return exc
    line = first_line(exc)
    if isinstance(exc, ProtocolError) and not isinstance(exc, TooBig):
        return ServiceError(400, line, "INVALID_ARGUMENT")
    if isinstance(exc, (TooBig, TooLarge)):  # a retry can never succeed
        return ServiceError(413, line, "INVALID_ARGUMENT")
    if isinstance(exc, QueueFull):
        return ServiceError(503, f"the queue is full: {line}", "RESOURCE_EXHAUSTED", {"Retry-After": "1"})
    if isinstance(exc, (Draining, Stuck)):
        return ServiceError(503, line, "UNAVAILABLE", {"Retry-After": "1"})
    if isinstance(exc, TimedOut):
        return ServiceError(504, line, "DEADLINE_EXCEEDED")
    if isinstance(exc, ForwardFailed):
        return ServiceError(500, f"the model's forward failed: {line}", "INTERNAL")
    return ServiceError(500, f"internal error: {first_line(exc, with_type=True)}", "INTERNAL")


class Metrics:
    """Prometheus series of one service (its own registry, so services in one process do not collide)."""

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


INLINE_BODY = 64 * 1024  # bodies up to this are read on the event loop; larger ones in the parse thread
_PARSE = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samebits-parse")  # one at a time: bounded memory


async def parsed_off_loop(parse: Callable[..., Any], size: int, *args: Any) -> Any:
    """``parse(*args)`` on the event loop for a small request, else in the parse thread (the loop
    goes on answering), one large request at a time."""
    if size <= INLINE_BODY:
        return parse(*args)
    return await asyncio.get_running_loop().run_in_executor(_PARSE, parse, *args)


class ModelService:
    """The model ``runner`` runs, served as ``name``. ``not_ready``: why it must never report
    ready (the ``--golden`` self-check failed; it still answers); ``restartable``: the runner's
    process, replaced after a forward hangs (``--isolate``); ``key``: requests are batched only
    with requests of the same key (``--pad``'s lengths)."""

    def __init__(
        self,
        runner: Runner,
        signature: Signature,
        *,
        name: str,
        options: ServeOptions = ServeOptions(),
        not_ready: str | None = None,
        restartable: Restartable | None = None,
        key: Callable[[ModelInputs], Hashable] | None = None,
    ) -> None:
        self.runner, self.signature, self.name, self.options, self.not_ready = (
            runner,
            signature,
            name,
            options,
            not_ready,
        )
        self.metrics = Metrics()
        self.batcher = Batcher.for_runner(
            runner, options, on_batch=lambda rows, s: self.metrics.batch.observe(rows), worker=restartable, key=key
        )
        generator = runner if isinstance(runner, Predictor) and supports_generate(runner.model) else None
        self.generating = generate_batcher(generator, options) if generator is not None else None
        self.vocab = vocab_size(generator.model) if generator is not None else None
        self.max_body = int(options.max_body_mb * 1024 * 1024)
        self.max_json = int(options.max_json_mb * 1024 * 1024)
        extensions = ["binary_tensor_data", *(["generate"] if self.generating is not None else [])]
        self.server_metadata = {"name": "samebits", "version": __version__, "extensions": extensions}
        self.model_metadata = {
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
                    "generate": self.generating is not None,  # POST /v2/models/{name}/generate
                }
            },
        }

    # -- lifetime -----------------------------------------------------------------------------
    async def start(self) -> None:
        await self.batcher.start()
        if self.generating is not None:
            await self.generating.start()

    async def close(self) -> None:
        await self.batcher.close()
        if self.generating is not None:
            await self.generating.close()

    # -- readiness ----------------------------------------------------------------------------
    def ready(self) -> bool:
        """Whether the service answers ready (a dead worker process is restarted first)."""
        self.batcher.watch_worker()
        b = self.batcher
        return (
            not b.draining
            and self.not_ready is None
            and b.stuck_since is None
            and not b.restarting
            and b.broken is None
        )

    def not_ready_reason(self) -> str | None:
        """Why the service is not ready, in words; ``None`` where it is."""
        b = self.batcher
        if self.ready():
            return None
        if b.broken is not None:
            return b.broken
        if b.restarting:
            return f"restarting the model's worker process {b.restart_reason}"
        if b.stuck_since is not None:
            return f"a forward has been running for {time.monotonic() - b.stuck_since:.0f} s"
        return "shutting down" if b.draining else self.not_ready

    def known(self, model_name: str, version: str = "") -> None:
        """A :class:`ServiceError` (404, NOT_FOUND) for any model or version but this one's."""
        if model_name != self.name:
            raise ServiceError(404, f"unknown model {model_name!r}; this server serves {self.name!r}", "NOT_FOUND")
        if version not in ("", "1"):
            raise ServiceError(404, f"unknown version {version!r} of {model_name!r}; it has version 1", "NOT_FOUND")

    @contextlib.contextmanager
    def counted(self, uncounted: type[BaseException] | tuple[type[BaseException], ...] = ()) -> Iterator[None]:
        """The request counted by its HTTP status and timed, for /metrics (both protocols); one
        that ends in ``uncounted`` (a client gone before its body was read) is not counted."""
        started, status = time.monotonic(), 200
        try:
            yield
        except uncounted:
            status = -1
            raise
        except BaseException as exc:
            status = service_error(exc).status if isinstance(exc, Exception) else 500
            raise
        finally:
            if status >= 0:
                self.metrics.requests.labels(str(status)).inc()
                self.metrics.latency.observe(time.monotonic() - started)

    # -- the pipeline -------------------------------------------------------------------------
    async def infer(self, tensors: dict[str, torch.Tensor], length: int) -> dict[str, torch.Tensor]:
        """The named outputs of checked tensors (:func:`checked`), those that carry a padded length
        cut back to it; every failure a :class:`ServiceError`."""
        try:
            output = await self.batcher.submit(self.signature.arguments(tensors))
        except Exception as exc:
            raise service_error(exc) from None
        named = self.signature.named_outputs(output)
        for out_name, dims in self.signature.crop.items():
            for dim in dims:
                named[out_name] = named[out_name].narrow(dim, 0, length)
        return named

    async def infer_body(self, body: bytes, header_length: str | None) -> tuple[dict[str, str], bytes]:
        """A REST infer request's body (JSON, or the binary extension) to its answer: (headers, body)."""
        try:
            request = await parsed_off_loop(self._decode, len(body), body, header_length)
        except Exception as exc:
            raise service_error(exc) from None
        named = await self.infer(request.tensors, request.length)
        entries, chunks = encode_outputs({n: named[n] for n in request.names}, request.binary_out)
        reply: dict[str, Any] = {"model_name": self.name, "model_version": "1", "outputs": entries}
        if request.request_id is not None:
            reply["id"] = request.request_id
        head = json.dumps(reply).encode()
        if not chunks:
            return {"Content-Type": "application/json"}, head
        return {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(head))}, head + b"".join(chunks)

    def _decode(self, body: bytes, header_length: str | None) -> Decoded:
        parsed, binary = parse_body(body, header_length, self.max_json)
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
        tensors, length = checked(tensors, self.signature)
        names, binary_out = self._requested(parsed)
        request_id = parsed.get("id")
        if request_id is not None and not isinstance(request_id, str):
            raise ProtocolError("'id' must be a string")
        return Decoded(tensors, names, binary_out, request_id, length)

    def _requested(self, request: dict[str, Any]) -> tuple[list[str], set[str]]:
        """The output names to answer with, and those to send in binary."""
        everything = [s.name for s in self.signature.outputs]
        all_binary = bool(parameters(request, "the request").get("binary_data_output", False))
        wanted = request.get("outputs")
        if wanted is None:
            return everything, set(everything) if all_binary else set()
        if not isinstance(wanted, list) or not all(
            isinstance(o, dict) and isinstance(o.get("name"), str) for o in wanted
        ):
            raise ProtocolError("'outputs' must be a list of objects with a 'name'")
        names = known_outputs([o["name"] for o in wanted], self.signature)
        binary = {o["name"] for o in wanted if parameters(o, f"output {o['name']}").get("binary_data", all_binary)}
        return names, binary

    async def generate(self, body: bytes) -> dict[str, Any]:
        """Greedy generation: ``{"input_ids": [...], "parameters": {"max_new_tokens": N}}`` ->
        ``{"output_ids": [...]}``, the tokens this prompt gets alone, whatever the load."""
        if self.generating is None:
            raise ServiceError(
                404, "this model has no transformers-style generate(): only /infer is served", "NOT_FOUND"
            )
        try:
            inputs, request_id = parse_generate(body, self.vocab, getattr(self.runner, "model", None))
            (tokens,) = await self.generating.submit(inputs)
        except BadGenerate as exc:
            raise ServiceError(400, str(exc), "INVALID_ARGUMENT") from None
        except Exception as exc:
            raise service_error(exc) from None
        reply: dict[str, Any] = {"model_name": self.name, "model_version": "1", "output_ids": tokens.tolist()}
        if request_id is not None:
            reply["id"] = request_id
        return reply


@dataclasses.dataclass
class Decoded:
    """One REST infer request read and checked: its tensors (padded to their bucket), the outputs
    it asks for (and which in binary), its id, and its length where inputs are padded."""

    tensors: dict[str, torch.Tensor]
    names: list[str]
    binary_out: set[str]
    request_id: str | None
    length: int
