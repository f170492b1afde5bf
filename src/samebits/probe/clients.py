"""One connection to the endpoint probed, per protocol: the Open Inference Protocol over REST
(JSON or the binary extension) and over gRPC (tritonclient's stubs of the service), and
OpenAI-compatible completions. Each :meth:`send` is one request with a timeout, its answer read
into raw output bytes; a request that gets no answer is one :class:`ProbeError` line saying why
(refused, closed, timed out, a status, a protocol mismatch)."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import socket
import urllib.parse
from typing import Any, Protocol

import numpy as np

from samebits.errors import UserError, printable
from samebits.probe import wire
from samebits.probe.wire import Answer, Tensor, WireError

PROTOCOLS = ("v2", "v2-grpc", "openai")
MAX_ANSWER = 256 << 20  # bytes of one answer read at most
MAX_GRPC_MESSAGE = 256 << 20


class ProbeError(UserError):
    """A request that got no usable answer; ``kind`` names why, for counting (``refused``,
    ``closed``, ``timeout``, ``status 503``, ``protocol``)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where and how to ask: ``http://HOST:PORT/v2/models/NAME`` (v2), ``grpc://HOST:PORT/v2/models/NAME``
    (v2-grpc), ``http://HOST:PORT/v1/completions`` or ``/v1/chat/completions`` (openai)."""

    url: str
    protocol: str
    host: str
    port: int
    path: str  # v2: /v2/models/NAME[/versions/V]; openai: the completions route
    model: str  # v2: the model's name; openai: the "model" field
    tls: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def endpoint(url: str, protocol: str | None = None, model_name: str | None = None) -> Endpoint:
    """The endpoint ``url`` names; the protocol from ``protocol`` or else the URL (``grpc://``:
    v2-grpc; a ``/v1/`` path: openai; else v2). A URL that names no model or route is one line."""
    parts = urllib.parse.urlsplit(url)
    shown = printable(url)
    if parts.scheme not in ("http", "https", "grpc") or not parts.hostname:
        raise ProbeError(f"URL {shown} is not http://HOST:PORT/..., https://... or grpc://HOST:PORT/...", "usage")
    if protocol is None:
        protocol = "v2-grpc" if parts.scheme == "grpc" else "openai" if "/v1/" in parts.path + "/" else "v2"
    if protocol not in PROTOCOLS:
        raise ProbeError(f"--protocol {printable(protocol)} is not one of {', '.join(PROTOCOLS)}", "usage")
    if (protocol == "v2-grpc") != (parts.scheme == "grpc"):
        raise ProbeError(f"--protocol {protocol} takes a {'grpc' if protocol == 'v2-grpc' else 'http'}:// URL", "usage")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ProbeError(f"URL {shown} has no valid port", "usage") from None
    path = parts.path.rstrip("/")
    if protocol == "openai":
        if not path.endswith(("/completions", "/chat/completions")):
            raise ProbeError(
                f"URL {shown}: give the route, http://HOST:PORT/v1/completions or /v1/chat/completions", "usage"
            )
        return Endpoint(url, protocol, parts.hostname, port, path, model_name or "", parts.scheme == "https")
    path = path.removesuffix("/infer")
    pieces = path.split("/")
    if "models" not in pieces or pieces.index("models") + 1 >= len(pieces):
        raise ProbeError(f"URL {shown} names no model: give {parts.scheme}://HOST:PORT/v2/models/NAME", "usage")
    name = pieces[pieces.index("models") + 1]
    return Endpoint(url, protocol, parts.hostname, port, path, name, parts.scheme == "https")


@dataclasses.dataclass(frozen=True)
class Sample:
    """One input sent in one request: v2 tensors (a batch of one row), or an OpenAI prompt."""

    label: str
    inputs: tuple[Tensor, ...] = ()
    prompt: str = ""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """An input as the server's metadata describes it (-1 for a variable dimension)."""

    name: str
    datatype: str
    shape: tuple[int, ...]


class Client(Protocol):
    """One connection to the endpoint."""

    endpoint: Endpoint

    def send(self, sample: Sample) -> Answer: ...

    def metadata(self) -> list[InputSpec]: ...

    def wire_request(self, sample: Sample) -> tuple[str, dict[str, str], bytes]: ...

    def close(self) -> None: ...


class _Http:
    """A keep-alive HTTP/1.1 connection: a request that fails on a reused connection (the server
    closed it while idle) is sent once more on a fresh one."""

    def __init__(self, ep: Endpoint, timeout: float) -> None:
        self.ep, self.timeout = ep, timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            kind = http.client.HTTPSConnection if self.ep.tls else http.client.HTTPConnection
            self._conn = kind(self.ep.host, self.ep.port, timeout=self.timeout)
        return self._conn

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        """(status, headers, body) of one request; :class:`ProbeError` where none came."""
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read(MAX_ANSWER + 1)
                if len(data) > MAX_ANSWER:
                    raise ProbeError(f"{self.ep.address} sent an answer over {MAX_ANSWER >> 20} MB", "protocol")
                if response.will_close:
                    self.close()
                return response.status, response.headers, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self.close()
                if reused and attempt == 0:
                    continue
                raise ProbeError(
                    f"{self.ep.address} closed the connection without an answer ({type(exc).__name__})", "closed"
                ) from None
            except (TimeoutError, socket.timeout):
                self.close()
                raise ProbeError(f"no answer from {self.ep.address} within {self.timeout:g} s", "timeout") from None
            except ConnectionRefusedError:
                self.close()
                raise ProbeError(f"nothing listens at {self.ep.address} (connection refused)", "refused") from None
            except socket.gaierror:
                self.close()
                raise ProbeError(f"cannot resolve the host {printable(self.ep.host)}", "refused") from None
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                raise ProbeError(
                    f"{self.ep.address} broke the exchange: {type(exc).__name__}: {printable(str(exc))[:120]}", "closed"
                ) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def status_error(ep: Endpoint, method: str, path: str, status: int, body: bytes) -> ProbeError:
    """One line for an answer with an error status, with the server's own line where it gave one."""
    said: Any = ""
    try:
        data = json.loads(body)
    except ValueError:
        said = body[:120].decode("utf-8", errors="replace")
    else:
        if isinstance(data, dict):
            said = data.get("error") or data.get("detail") or ""
        if isinstance(said, dict):  # OpenAI's {"error": {"message": ...}}
            said = said.get("message", "")
    said = printable(" ".join(str(said).split()))[:160]
    hint = " (no such route or model: another --protocol, or another model name?)" if status in (404, 405) else ""
    return ProbeError(
        f"{ep.address} answered {status} to {method} {path}{hint}{': ' + said if said else ''}", f"status {status}"
    )


class V2Rest:
    """The Open Inference Protocol over REST; ``binary``: the binary tensor extension both ways."""

    def __init__(self, ep: Endpoint, timeout: float, binary: bool = False) -> None:
        self.endpoint, self.binary = ep, binary
        self._http = _Http(ep, timeout)

    def wire_request(self, sample: Sample) -> tuple[str, dict[str, str], bytes]:
        """(path, headers, body) of the infer request for ``sample`` (also what wrk sends)."""
        body, headers = wire.request(sample.inputs, self.binary)
        return self.endpoint.path + "/infer", headers, body

    def send(self, sample: Sample) -> Answer:
        path, headers, body = self.wire_request(sample)
        status, got, data = self._http.request("POST", path, body, headers)
        if status != 200:
            raise status_error(self.endpoint, "POST", path, status, data)
        try:
            return wire.answer(data, got.get(wire.HEADER_LENGTH))
        except WireError as exc:
            raise ProbeError(
                f"{self.endpoint.address} does not answer the Open Inference Protocol: {exc}", "protocol"
            ) from None

    def metadata(self) -> list[InputSpec]:
        """The model's inputs from ``GET /v2/models/NAME``."""
        status, _, data = self._http.request("GET", self.endpoint.path, None, {})
        if status != 200:
            raise status_error(self.endpoint, "GET", self.endpoint.path, status, data)
        try:
            meta = json.loads(data)
            return [InputSpec(i["name"], i["datatype"], tuple(int(d) for d in i["shape"])) for i in meta["inputs"]]
        except (ValueError, KeyError, TypeError):
            raise ProbeError(
                f"{self.endpoint.address} answered GET {self.endpoint.path} without the model's inputs (not v2 metadata)",
                "protocol",
            ) from None

    def close(self) -> None:
        self._http.close()


class OpenAI:
    """OpenAI-compatible ``/v1/completions`` or ``/v1/chat/completions``, greedy (temperature 0),
    with ``seed`` and ``logprobs`` asked for; the answer is its text, and where returned its
    tokens and their logprobs."""

    def __init__(self, ep: Endpoint, timeout: float, max_tokens: int = 16, seed: int = 0) -> None:
        self.endpoint, self.max_tokens, self.seed = ep, max_tokens, seed
        self._http = _Http(ep, timeout)
        self.chat = ep.path.endswith("/chat/completions")

    def wire_request(self, sample: Sample) -> tuple[str, dict[str, str], bytes]:
        body: dict[str, Any] = {"model": self.endpoint.model, "max_tokens": self.max_tokens, "temperature": 0}
        body["seed"] = self.seed
        if self.chat:
            body.update(messages=[{"role": "user", "content": sample.prompt}], logprobs=True)
        else:
            body.update(prompt=sample.prompt, logprobs=1)
        return self.endpoint.path, {"Content-Type": "application/json"}, json.dumps(body).encode()

    def send(self, sample: Sample) -> Answer:
        path, headers, body = self.wire_request(sample)
        status, _, data = self._http.request("POST", path, body, headers)
        if status != 200:
            raise status_error(self.endpoint, "POST", path, status, data)
        try:
            return completion(json.loads(data), self.chat)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            raise ProbeError(
                f"{self.endpoint.address} does not answer OpenAI {'chat ' if self.chat else ''}completions "
                f"(no choices[0].{'message.content' if self.chat else 'text'})",
                "protocol",
            ) from None

    def metadata(self) -> list[InputSpec]:
        raise ProbeError("an OpenAI endpoint has no tensor metadata", "protocol")

    def close(self) -> None:
        self._http.close()


def completion(data: dict[str, Any], chat: bool) -> Answer:
    """An OpenAI answer's first choice: ``text``, and ``tokens`` and ``logprobs`` where it has them
    (completions: ``logprobs.tokens``/``token_logprobs``; chat: ``logprobs.content[].token``/``logprob``)."""
    choice = data["choices"][0]
    content = choice["message"]["content"] if chat else choice["text"]
    if not isinstance(content, str):
        raise TypeError("no text")
    outputs = [wire.text("text", [content])]
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        if chat:
            entries = logprobs.get("content") or []
            tokens = [str(e.get("token")) for e in entries]
            values = [e.get("logprob") for e in entries]
        else:
            tokens = [str(t) for t in logprobs.get("tokens") or []]
            values = logprobs.get("token_logprobs") or []
        if tokens:
            outputs.append(wire.text("tokens", tokens))
        if values:
            floats = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
            outputs.append(wire.from_array("logprobs", floats, "FP64"))
    return tuple(outputs)


class V2Grpc:
    """The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``), through
    tritonclient's generated stubs (``pip install 'tritonclient[grpc]'``); one channel each."""

    def __init__(self, ep: Endpoint, timeout: float) -> None:
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # wrk and restart commands fork+exec
        try:
            import grpc
            from tritonclient.grpc import service_pb2, service_pb2_grpc
        except ImportError:
            from samebits.errors import MissingDependencyError

            raise MissingDependencyError("tritonclient[grpc]", "--protocol v2-grpc", "probe") from None
        self.endpoint, self.timeout = ep, timeout
        self._grpc, self._pb = grpc, service_pb2
        options = [
            ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE),
            ("grpc.max_send_message_length", MAX_GRPC_MESSAGE),
        ]
        self._channel = grpc.insecure_channel(ep.address, options=options)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)

    def _call(self, method: str, message: Any) -> Any:
        try:
            return getattr(self._stub, method)(message, timeout=self.timeout)
        except self._grpc.RpcError as exc:
            code = exc.code()
            details = printable(" ".join(str(exc.details() or "").split()))[:160]
            if code == self._grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ProbeError(
                    f"no answer from {self.endpoint.address} within {self.timeout:g} s", "timeout"
                ) from None
            if code == self._grpc.StatusCode.UNAVAILABLE:
                raise ProbeError(f"{self.endpoint.address} is unavailable over gRPC: {details}", "closed") from None
            hint = " (not the inference service: another --protocol?)" if code.name == "UNIMPLEMENTED" else ""
            raise ProbeError(
                f"{self.endpoint.address} answered {method} with {code.name}{hint}: {details}", f"gRPC {code.name}"
            ) from None

    def metadata(self) -> list[InputSpec]:
        meta = self._call("ModelMetadata", self._pb.ModelMetadataRequest(name=self.endpoint.model))
        return [InputSpec(i.name, i.datatype, tuple(i.shape)) for i in meta.inputs]

    def send(self, sample: Sample) -> Answer:
        request = self._pb.ModelInferRequest(model_name=self.endpoint.model)
        for t in sample.inputs:
            request.inputs.add(name=t.name, datatype=t.datatype, shape=list(t.shape))
            request.raw_input_contents.append(t.raw)
        response = self._call("ModelInfer", request)
        outputs = []
        for i, out in enumerate(response.outputs):
            shape = tuple(int(d) for d in out.shape)
            if i < len(response.raw_output_contents):
                outputs.append(Tensor(out.name, out.datatype, shape, response.raw_output_contents[i]))
            else:
                outputs.append(_typed(out, shape))
        return tuple(outputs)

    def wire_request(self, sample: Sample) -> tuple[str, dict[str, str], bytes]:
        raise ProbeError("gRPC requests are sent by the Python client only", "usage")

    def close(self) -> None:
        self._channel.close()


_CONTENTS = {"BOOL": "bool", "INT8": "int", "INT16": "int", "INT32": "int", "INT64": "int64", "UINT8": "uint"}
_CONTENTS.update({"UINT16": "uint", "UINT32": "uint", "UINT64": "uint64", "FP32": "fp32", "FP64": "fp64"})


def _typed(out: Any, shape: tuple[int, ...]) -> Tensor:
    """An output sent as typed ``contents`` instead of raw bytes."""
    field = _CONTENTS.get(out.datatype)
    if field is None:
        raise ProbeError(f"output {out.name}: {out.datatype} came without raw bytes", "protocol")
    values = np.array(list(getattr(out.contents, f"{field}_contents")))
    return wire.from_array(out.name, values.reshape(shape), out.datatype)


def connect(ep: Endpoint, timeout: float, binary: bool = False, max_tokens: int = 16, seed: int = 0) -> Client:
    """A new connection (client) to ``ep``."""
    if ep.protocol == "v2-grpc":
        return V2Grpc(ep, timeout)
    if ep.protocol == "openai":
        return OpenAI(ep, timeout, max_tokens, seed)
    return V2Rest(ep, timeout, binary)
