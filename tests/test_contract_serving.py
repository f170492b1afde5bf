"""The contract, class 'serving isolation': one client's bad input never fails another's, every
bad request is a 4xx with a JSON body, a hung or dead model never leaves requests unanswered."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi", reason="samebits serve needs its extra: pip install 'samebits[serve]'")

from test_serve import MODELS, Server, row  # noqa: E402


@pytest.fixture(scope="module")
def moody():
    server = Server(f"{MODELS}:moody", "--max-batch-size", "4", "--max-queue", "6", "--max-json-mb", "0.05")
    yield server
    assert server.stop() == 0


def infer_ids(server: Server, ids: list[list[int]]) -> tuple[int, dict]:
    body = {"inputs": [{"name": "ids", "shape": [len(ids), len(ids[0])], "datatype": "INT64", "data": ids}]}
    status, _, raw = server.request(f"/v2/models/{server.name}/infer", json.dumps(body).encode())
    return status, json.loads(raw)


def test_a_request_larger_than_the_queue_is_413_not_a_retryable_503(moody):
    code, answer = moody.infer(torch.zeros(8, 8))
    assert code == 413 and "--max-queue" in answer["error"]


def test_a_batch_with_one_failing_request_still_answers_the_others_with_their_bits(moody):
    alone = [moody.infer(row(float(v))) for v in (0.5, 0.75)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        busy = pool.submit(moody.infer, row(7.0))  # the worker sleeps 0.5 s: what follows queues into one batch
        time.sleep(0.15)
        bad = pool.submit(moody.infer, row(13.0))
        good = [pool.submit(moody.infer, row(float(v))) for v in (0.5, 0.75)]
        assert busy.result(timeout=60)[0] == 200
        assert bad.result(timeout=60)[0] == 500 and "row marked to fail" in bad.result()[1]["error"]
        assert [g.result(timeout=60) for g in good] == alone


def test_bad_shapes_nested_json_and_a_large_json_part_are_4xx_with_a_json_body(moody):
    url = f"/v2/models/{moody.name}/infer"
    huge = {"inputs": [{"name": "x", "shape": [0, 2**40], "datatype": "FP32", "data": []}]}
    code, _, raw = moody.request(url, json.dumps(huge).encode())
    assert code == 400 and "larger than" in json.loads(raw)["error"]
    head = json.dumps(
        {"inputs": [{"name": "x", "shape": [2**40, 8], "datatype": "FP32", "parameters": {"binary_data_size": 0}}]}
    ).encode()
    code, _, raw = moody.request(url, head, {"Inference-Header-Content-Length": str(len(head))})
    assert code == 400 and "larger than" in json.loads(raw)["error"]
    code, _, raw = moody.request(url, b"[" * 100_000 + b"]" * 100_000)
    assert code == 413  # over --max-json-mb 0.05 first; a smaller deep one:
    code, _, raw = moody.request(url, b"[" * 10_000 + b"]" * 10_000)
    assert code == 400 and "nested" in json.loads(raw)["error"]
    big = json.dumps(
        {"inputs": [{"name": "x", "shape": [6, 8], "datatype": "FP32", "data": [0.5] * 48}], "id": "x" * 60_000}
    )
    code, _, raw = moody.request(url, big.encode())
    assert code == 413 and "--max-json-mb" in json.loads(raw)["error"]
    assert moody.infer(row(0.5))[0] == 200


def test_a_lone_surrogate_and_integers_past_64_bits_get_one_answer_each(moody):
    """A tensor name or id holding a lone surrogate (JSON's \\ud800) was a plain-text 500 with a
    traceback; an FP32 value of 2**64 was 200 through orjson but 400 when an unrelated NaN sent the
    body to json: two answers for one tensor."""
    url = f"/v2/models/{moody.name}/infer"
    for body in (
        '{"inputs": [{"name": "x\\ud800", "shape": [1, 8], "datatype": "FP32", "data": [0,0,0,0,0,0,0,0]}]}',
        '{"id": "\\udc00", "inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0,0,0,0,0,0,0,0]}]}',
    ):
        code, headers, raw = moody.request(url, body.encode())
        assert code == 400 and "lone surrogate" in json.loads(raw)["error"], raw
    answers = set()
    for extra in ("0.5", "NaN"):  # the same 2**64 with and without a value orjson refuses
        body = f'{{"inputs": [{{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [18446744073709551616, {extra}, 0,0,0,0,0,0]}}]}}'
        answers.add(moody.request(url, body.encode())[0])
    assert answers == {200}


def test_grpc_bytes_that_do_not_parse_are_invalid_argument():
    pytest.importorskip("grpc")
    import grpc

    server = Server(f"{MODELS}:moody", "--max-batch-size", "4", "--grpc-port", "0")
    try:
        from test_serve_grpc import grpc_address

        channel = grpc.insecure_channel(grpc_address(server))
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with pytest.raises(grpc.RpcError) as raised:
            call(b"\xff\xff\xff not a message", timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "is not a ModelInferRequest message: it does not parse" in raised.value.details()
        channel.close()
    finally:
        assert server.stop() == 0


def test_ids_outside_the_embedding_are_400_before_batching_and_fail_no_one_else():
    server = Server(f"{MODELS}:embedder", "--max-batch-size", "4")
    try:
        alone = infer_ids(server, [[1, 2, 3]])
        code, answer = infer_ids(server, [[1, 50, 3]])
        assert code == 400 and "outside [0, 10)" in answer["error"]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            asks = [pool.submit(infer_ids, server, [[1, 2, 3]] if i % 2 else [[-1, 2, 3]]) for i in range(8)]
            results = [a.result(timeout=60) for a in asks]
        assert [r[0] for r in results] == [400, 200] * 4 and all(r == alone for r in results[1::2])
    finally:
        assert server.stop() == 0


@pytest.mark.serial  # forward timeouts of a second
def test_a_forward_that_never_returns_in_the_thread_leaves_no_request_unanswered_and_sigterm_still_stops():
    server = Server(f"{MODELS}:stuck", "--max-batch-size", "4", "--forward-timeout-s", "0.3", "--timeout-s", "2")
    assert server.infer(row(0.5))[0] == 200
    code, answer = server.infer(row(7.0))  # never returns: the thread cannot be ended
    assert code == 503 and "--forward-timeout-s" in answer["error"]
    start = time.monotonic()
    code, answer = server.infer(row(0.5))
    assert code == 503 and "no new work" in answer["error"] and time.monotonic() - start < 5
    status, _, raw = server.request("/v2/health/ready")
    assert status == 503 and "a forward has been running" in json.loads(raw)["reason"]
    assert server.request("/v2/health/live")[0] == 200
    start = time.monotonic()
    assert server.stop() == 0 and time.monotonic() - start < 30


@pytest.mark.serial  # forward timeouts of a second
def test_a_request_retried_alone_runs_under_the_forward_timeout_too():
    """A batch that raises is retried request by request; the retry of one that hangs had no
    timeout: neither it nor any later request was answered, ready stayed 200, SIGTERM did not end
    the server. Now the retry answers 503 within the timeout and the rest behaves as a hang does."""
    server = Server(
        f"{MODELS}:hangs_when_retried", "--max-batch-size", "4", "--forward-timeout-s", "1", "--timeout-s", "3"
    )
    try:
        assert server.infer(row(0.5))[0] == 200
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            slow = pool.submit(server.infer, row(9.0))  # holds the worker: the next two queue together
            time.sleep(0.15)
            failing = pool.submit(server.infer, row(13.0))
            time.sleep(0.1)  # queued in this order, so retried in it: the failing row before the hanging one
            hanging = pool.submit(server.infer, row(7.0))
            answers = [f.result(timeout=30) for f in (slow, failing, hanging)]
        assert answers[0][0] == 200 and answers[1][0] == 500  # alone, the 13.0 row fails itself only
        assert answers[2][0] == 503 and "--forward-timeout-s" in answers[2][1]["error"]
        status, _, raw = server.request("/v2/health/ready")
        assert status == 503 and "a forward has been running" in json.loads(raw)["reason"]
        start = time.monotonic()
        assert server.infer(row(0.5))[0] == 503 and time.monotonic() - start < 5
    finally:
        start = time.monotonic()
        assert server.stop() == 0 and time.monotonic() - start < 30


def _worker_of(pid: int) -> int:
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return next(int(r[0]) for r in rows if len(r) == 3 and int(r[1]) == pid and "samebits.child serve" in r[2])


def _wait_ready(server, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while server.request("/v2/health/ready")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)


def test_an_isolated_worker_killed_from_outside_is_restarted_and_not_ready_meanwhile():
    server = Server(f"{MODELS}:moody", "--isolate", "--max-batch-size", "4")
    try:
        before = server.infer(row(0.5))
        os.kill(_worker_of(server.proc.pid), signal.SIGKILL)  # what the OOM killer does
        time.sleep(0.2)
        status, _, raw = server.request("/v2/health/ready")
        assert status == 503 and "restarting the model's worker process after it died" in json.loads(raw)["reason"]
        _wait_ready(server)
        assert server.infer(row(0.5)) == before
    finally:
        assert server.stop() == 0


def test_a_request_that_reaches_a_dead_worker_gets_503_and_the_worker_comes_back():
    server = Server(f"{MODELS}:moody", "--isolate", "--max-batch-size", "4")
    try:
        before = server.infer(row(0.5))
        os.kill(_worker_of(server.proc.pid), signal.SIGKILL)
        code, answer = server.infer(row(0.5))  # straight into the dead pipe
        assert code == 503 and "killed by signal 9" in answer["error"]
        _wait_ready(server)
        assert server.infer(row(0.5)) == before
    finally:
        assert server.stop() == 0


def test_a_large_body_is_parsed_off_the_event_loop_and_a_bug_is_a_json_500(monkeypatch):
    from fastapi.testclient import TestClient

    import serve_models
    from samebits.serve.server import build
    from samebits.serve.service import ModelService

    threads = []
    real = ModelService._decode
    monkeypatch.setattr(
        ModelService, "_decode", lambda self, *a: threads.append(threading.current_thread().name) or real(self, *a)
    )
    model, example = serve_models.mlp()
    app, runner, signature = build(model, example)
    try:
        x = torch.randn(300, 32)
        body = {"inputs": [{"name": "x", "shape": [300, 32], "datatype": "FP32", "data": x.reshape(-1).tolist()}]}
        with TestClient(app, raise_server_exceptions=False) as client:
            assert client.post(f"/v2/models/{app.state.model_name}/infer", json=body).status_code == 200
            assert threads[-1].startswith("samebits-parse")  # over 64 KiB: not on the event loop
            monkeypatch.setattr(type(signature), "named_outputs", lambda self, output: 1 / 0)  # a bug
            broken = client.post(f"/v2/models/{app.state.model_name}/infer", json=body)
        assert broken.status_code == 500 and broken.json()["error"].startswith("internal error: ZeroDivisionError")
    finally:
        runner.close()
