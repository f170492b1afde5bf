"""The infer route's short path (samebits.serve.fastpath): what it takes, what it leaves to
FastAPI, and how it reads a body. The answers themselves are the REST tests' (tests/test_serve*.py
go through it)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from samebits.serve.fastpath import BodyTooLarge, Disconnected, InferShortPath, read_body, route_path

PATH = "/v2/models/m/infer"


def messages(*chunks: bytes, disconnect: bool = False):
    queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    if disconnect:
        queue = [*queue[:1], {"type": "http.disconnect"}]

    async def receive():
        return queue.pop(0)

    return receive


def call(scope: dict, body: bytes = b"{}") -> tuple[list[str], list[dict]]:
    seen, sent = [], []

    async def app(scope, receive, send):
        seen.append("fastapi")

    async def handle(receive, headers):
        seen.append(f"short {headers.get('x-test')} {await read_body(receive, 100)!r}")
        return 200, {"Content-Type": "application/json"}, b'{"ok":1}'

    async def send(message):
        sent.append(message)

    asyncio.run(InferShortPath(app, PATH, handle)(scope, messages(body), send))
    return seen, sent


def scope(method: str = "POST", path: str = PATH, root: str = "") -> dict:
    return {"type": "http", "method": method, "path": path, "root_path": root, "headers": [(b"x-test", b"yes")]}


def test_post_on_the_infer_path_is_answered_by_the_handler_with_a_length():
    seen, sent = call(scope(), b'{"inputs": []}')
    assert seen == ["short yes b'{\"inputs\": []}'"]
    assert sent[0]["status"] == 200
    assert (b"content-length", b"8") in sent[0]["headers"] and (b"content-type", b"application/json") in sent[0][
        "headers"
    ]
    assert sent[1]["body"] == b'{"ok":1}'


@pytest.mark.parametrize(
    "s",
    [scope("GET"), scope(path="/v2/models/m/ready"), scope(path="/v2/models/other/infer"), {"type": "lifespan"}],
    ids=["get", "other-route", "other-model", "lifespan"],
)
def test_everything_else_goes_to_fastapi(s):
    seen, sent = call(s)
    assert seen == ["fastapi"] and sent == []


def test_a_mounted_app_matches_below_its_mount_point():
    seen, _ = call(scope(path="/api" + PATH, root="/api"))
    assert seen[0].startswith("short")
    assert route_path({"path": "/api" + PATH, "root_path": "/api"}) == PATH
    assert route_path({"path": PATH}) == PATH


def test_a_body_is_read_across_chunks_and_refused_past_the_limit():
    assert asyncio.run(read_body(messages(b"ab", b"cd", b"e"), 5)) == b"abcde"
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_body(messages(b"abc", b"def"), 5))
    with pytest.raises(Disconnected):
        asyncio.run(read_body(messages(b"ab", b"cd", disconnect=True), 100))


def test_a_client_gone_gets_nothing_sent():
    sent = []

    async def handle(receive, headers):
        return -1, {}, b""

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        raise AssertionError("not FastAPI's")

    asyncio.run(InferShortPath(app, PATH, handle)(scope(), messages(b""), send))
    assert sent == []


def test_a_repeated_header_gives_its_first_value_as_starlette_does():
    got = []

    async def handle(receive, headers):
        got.append(headers["inference-header-content-length"])
        return 200, {}, b""

    async def send(message):
        pass

    s = {**scope(), "headers": [(b"inference-header-content-length", b"2"), (b"inference-header-content-length", b"9")]}
    asyncio.run(InferShortPath(None, PATH, handle)(s, messages(b""), send))  # type: ignore[arg-type]
    assert got == ["2"]


@pytest.mark.parametrize("depth, refused", [(63, False), (64, True)])
def test_a_request_nested_past_the_limit_is_refused_as_before(depth, refused):
    """64 levels of containers around a value is 65 levels: refused, by orjson's path as by json's."""
    from samebits.files import BadJson, parse_json
    from samebits.serve.protocol import parse_request_json

    text = b"[" * depth + b"1" + b"]" * depth
    for parse in (parse_json, parse_request_json):
        if refused:
            with pytest.raises(BadJson, match="nested more than 64 levels"):
                parse(text)
        else:
            assert parse(text) is not None


@pytest.mark.parametrize(
    "datatype", ["BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64"]
)
def test_raw_bytes_come_back_as_the_same_tensor_of_every_datatype(datatype):
    """from_raw reads little-endian bytes into a tensor that owns its memory: raw_bytes of it
    gives the bytes back, and it is writable."""
    from samebits.serve.protocol import DATATYPES, from_raw, raw_bytes

    dtype = DATATYPES[datatype]
    source = (torch.arange(-6, 6).reshape(3, 4) * (7 if dtype.is_floating_point else 1)).to(dtype)
    if dtype.is_floating_point:
        source = source / 3
    raw = raw_bytes(source)
    tensor = from_raw(raw, datatype, [3, 4])
    assert tensor.dtype == dtype and tensor.shape == (3, 4)
    assert torch.equal(tensor, source) and raw_bytes(tensor) == raw
    tensor.fill_(1)  # its own memory, not the request's buffer
    assert raw_bytes(from_raw(raw, datatype, [3, 4])) == raw
    assert from_raw(b"", datatype, [0, 4]).shape == (0, 4)
