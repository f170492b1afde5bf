"""The infer request's short path: a plain ASGI handler in front of FastAPI for
``POST /v2/models/{name}/infer``, the one route that runs at load. It skips routing, request
objects and dependency solving (about a tenth of the server's samples under load, profiled);
everything else, and any other method on that path, goes through the FastAPI app as before. A
client gone before its body was read gets nothing and is not counted in the metrics."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# (the receive channel, the request's headers by lower-case name) -> (status, headers, body);
# a negative status: the client is gone, nothing is sent
Handler = Callable[[Receive, dict[str, str]], Awaitable[tuple[int, dict[str, str], bytes]]]


class Disconnected(Exception):
    """The client went away before its body was read."""


class BodyTooLarge(Exception):
    """A body over the server's limit (answered 413 by the handler)."""


def route_path(scope: Scope) -> str:
    """The path below the app's mount point (Starlette keeps the full path in ``path``)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def read_body(receive: Receive, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes without reading the rest."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def error_body(message: str) -> bytes:
    """``{"error": message}`` as FastAPI's JSONResponse writes it."""
    return json.dumps({"error": message}, ensure_ascii=False, separators=(",", ":")).encode()


class InferShortPath:
    """ASGI middleware: ``POST`` on ``path`` is answered by ``handle``; everything else by ``app``."""

    def __init__(self, app: ASGIApp, path: str, handle: Handler) -> None:
        self.app, self.path, self.handle = app, path, handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or route_path(scope) != self.path:
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", ()):  # a repeated header: its first value, as Starlette's
            headers.setdefault(k.decode("latin-1"), v.decode("latin-1"))
        status, extra, body = await self.handle(receive, headers)
        if status < 0:
            return
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
        raw.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})
