"""The HTTP application (FastAPI): the Open Inference Protocol's endpoints over one
:class:`~samebits.serve.service.ModelService`, Prometheus metrics, and errors as
``{"error": "..."}``. Routes only: what a request means is the service's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from samebits._version import __version__
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Restartable, Runner
from samebits.serve.fastpath import ASGIApp, BodyTooLarge, Disconnected, InferShortPath, error_body, read_body
from samebits.serve.options import ServeOptions
from samebits.serve.protocol import HEADER_LENGTH
from samebits.serve.service import ModelService, ServiceError, service_error
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
    :func:`samebits.serve.server.serve`. ``not_ready``, ``restartable``, ``key``: see
    :class:`~samebits.serve.service.ModelService` (``app.state.service``)."""
    service = ModelService(
        runner, signature, name=name, options=options, not_ready=not_ready, restartable=restartable, key=key
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        yield
        await service.close()

    app = FastAPI(title="samebits serve", version=__version__, lifespan=lifespan)
    app.state.service = service
    app.state.model_name = name

    @app.exception_handler(ServiceError)
    async def _error(request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        """Anything else is samebits' bug: still an answer in the protocol's shape."""
        return JSONResponse({"error": str(service_error(exc))}, status_code=500)

    def readiness(body: dict[str, Any]) -> JSONResponse:
        reason = service.not_ready_reason()
        if reason is not None:
            body["reason"] = reason
        return JSONResponse({**body, "ready": reason is None}, status_code=200 if reason is None else 503)

    @app.get("/v2")
    async def server_metadata() -> dict[str, Any]:
        return dict(service.server_metadata)

    @app.get("/v2/health/live")
    async def live() -> dict[str, bool]:
        return {"live": True}

    @app.get("/v2/health/ready")
    async def server_ready() -> JSONResponse:
        return readiness({})

    @app.get("/v2/models/{model_name}")
    async def metadata(model_name: str) -> dict[str, Any]:
        service.known(model_name)
        return service.model_metadata

    @app.get("/v2/models/{model_name}/ready")
    async def model_ready(model_name: str) -> JSONResponse:
        service.known(model_name)
        return readiness({"name": name})

    @app.get("/metrics")
    async def prometheus() -> Response:
        service.metrics.queue.set(service.batcher.queued_rows)
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def _body(request: Request) -> bytes:
        limit = service.max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(int(declared), limit)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(None, limit)
            chunks.append(chunk)
        return b"".join(chunks)

    # POST here is answered by InferShortPath (below) before routing; the route stays for the
    # OpenAPI schema and answers the same where the short path is bypassed
    @app.post("/v2/models/{model_name}/infer", openapi_extra=INFER_SCHEMA)
    async def infer(model_name: str, request: Request) -> Response:
        with service.counted():
            service.known(model_name)
            headers, payload = await service.infer_body(
                await _body(request), request.headers.get(HEADER_LENGTH.lower())
            )
            return Response(payload, headers=headers)

    @app.post("/v2/models/{model_name}/generate")
    async def generate(model_name: str, request: Request) -> Response:
        """Greedy generation: the tokens this prompt gets alone, whatever the load."""
        with service.counted():
            service.known(model_name)
            return JSONResponse(await service.generate(await _body(request)))

    async def infer_short(receive: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """``infer`` without FastAPI's routing and request objects (the same answers)."""
        try:
            with service.counted(uncounted=Disconnected):
                declared = headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > service.max_body:
                    raise _too_large(int(declared), service.max_body)
                try:
                    body = await read_body(receive, service.max_body)
                except BodyTooLarge:
                    raise _too_large(None, service.max_body) from None
                extra, payload = await service.infer_body(body, headers.get(HEADER_LENGTH.lower()))
                return 200, extra, payload
        except Disconnected:
            return -1, {}, b""
        except Exception as exc:  # answered in the protocol's shape, as the app's handler does
            failed = service_error(exc)
            return failed.status, {"Content-Type": "application/json", **failed.headers}, error_body(str(failed))

    # Inside FastAPI where the app is mounted into another; in front of all of it (FastAPI's own
    # middleware: telemetry, body limit, error pages) where samebits runs the server (front())
    path = f"/v2/models/{name}/infer"
    app.add_middleware(InferShortPath, path=path, handle=infer_short)
    app.state.asgi = InferShortPath(cast(ASGIApp, app), path, infer_short)
    app.state.asgi_middleware = tuple(app.user_middleware)
    return app


def _too_large(size: int | None, limit: int) -> ServiceError:
    said = f"the body is {size} bytes; the limit is {limit}" if size is not None else f"the body is over {limit} bytes"
    return ServiceError(413, f"{said} (--max-body-mb)", "RESOURCE_EXHAUSTED")


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
