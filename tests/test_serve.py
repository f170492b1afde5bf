"""`samebits serve`: a real server (uvicorn on 127.0.0.1, a free port, in its own process) and
real HTTP clients, among them `tritonclient.http`, which nobody here wrote. Every answer must
have the bits of the Predictor's `predict_one` on that sample, whatever shared its batch."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi", reason="samebits serve needs its extra: pip install 'samebits[serve]'")


from conftest import scrubbed_env  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = HERE / "serve_models.py"
REQUESTS = 96  # every request loop is bounded in count and in time


class Server:
    """``samebits serve`` in a child process; the port is read from its announcement."""

    def __init__(self, spec: str, *args: str, strict_blas: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samebits", "serve", spec, "--port", "0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            # this test process runs without MKL's strict mode: the server too (unless asked), so
            # that its answers can be compared with references computed here (test_strict_blas.py)
            env=scrubbed_env(**({} if strict_blas else {"SAMEBITS_STRICT_BLAS": "0"})),
        )
        deadline = time.monotonic() + 120
        self.lines: list[str] = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"the server exited: {''.join(self.lines)}")
            self.lines.append(line)
            if line.startswith("serving "):
                self.name = line.split()[1]
                self.url = line.split()[3]
                break
        else:
            raise AssertionError("the server did not start within 120 s")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # keep the pipe drained

    def request(self, path: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
        req = urllib.request.Request(
            self.url + path, data=body, headers=headers or {}, method="POST" if body is not None else "GET"
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def infer(self, x: torch.Tensor, **extra) -> tuple[int, dict]:
        body = {
            "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.reshape(-1).tolist()}],
            **extra,
        }
        status, _, raw = self.request(
            f"/v2/models/{self.name}/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        return status, json.loads(raw)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def mlp():
    server = Server(f"{MODELS}:mlp", "--max-batch-size", "16")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def moody():
    server = Server(
        f"{MODELS}:moody", "--max-batch-size", "4", "--max-queue", "6", "--timeout-s", "0.3", "--max-body-mb", "0.01"
    )
    yield server
    assert server.stop() == 0


def as_tensor(answer: dict, name: str = "output_0") -> torch.Tensor:
    out = next(o for o in answer["outputs"] if o["name"] == name)
    return torch.tensor(out["data"], dtype=torch.float32).reshape(out["shape"])


def test_concurrent_requests_have_the_bits_of_the_sample_alone(mlp, reference):
    gen = torch.Generator().manual_seed(1)
    requests = [torch.randn(1 + i % 3, 32, generator=gen) for i in range(REQUESTS)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(mlp.infer, requests, timeout=120))
    assert all(status == 200 for status, _ in answers)
    for x, (_, answer) in zip(requests, answers):
        got = as_tensor(answer)
        assert got.shape == (x.shape[0], 10)
        for i in range(x.shape[0]):
            assert torch.equal(got[i], reference.predict_one(x[i])), "an answer depends on its batch"


def test_tritonclient_speaks_to_it_with_binary_tensors(mlp, reference):
    http = pytest.importorskip("tritonclient.http", reason="the protocol test uses tritonclient[http]")
    client = http.InferenceServerClient(mlp.url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(mlp.name)
    meta = client.get_model_metadata(mlp.name)
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 32]}]
    assert meta["parameters"]["samebits"]["verified_batch_sizes"]
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
    inp = http.InferInput("x", [5, 32], "FP32")
    inp.set_data_from_numpy(x.numpy())  # binary by default
    result = client.infer(mlp.name, [inp], request_id="abc", outputs=[http.InferRequestedOutput("output_0")])
    got = torch.from_numpy(result.as_numpy("output_0").copy())
    assert result.get_response()["id"] == "abc"
    assert all(torch.equal(got[i], reference.predict_one(x[i])) for i in range(5))


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (
            json.dumps({"inputs": [{"name": "x", "shape": [1, 31], "datatype": "FP32", "data": [0.0] * 31}]}).encode(),
            400,
            "shape [-1, 32]",
        ),
        (
            json.dumps({"inputs": [{"name": "x", "shape": [1, 32], "datatype": "INT64", "data": [0] * 32}]}).encode(),
            400,
            "must be FP32",
        ),
        (
            json.dumps({"inputs": [{"name": "y", "shape": [1, 32], "datatype": "FP32", "data": [0.0] * 32}]}).encode(),
            400,
            "missing x",
        ),
        (
            json.dumps({"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": [0.0] * 31}]}).encode(),
            400,
            "holds 32 values",
        ),
        (
            json.dumps({"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": ["a"] * 32}]}).encode(),
            400,
            "not FP32",
        ),
        (json.dumps({"inputs": [], "extra": 1}).encode(), 400, "unknown request field"),
        (
            json.dumps(
                {
                    "inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": [0.0] * 32}],
                    "outputs": [{"name": "nope"}],
                }
            ).encode(),
            400,
            "unknown output",
        ),
    ],
)
def test_bad_requests_get_400_and_one_line(mlp, body, status, says):
    code, _, raw = mlp.request(f"/v2/models/{mlp.name}/infer", body, {"Content-Type": "application/json"})
    error = json.loads(raw)["error"]
    assert code == status and says in error and "\n" not in error


def test_unknown_model_and_nested_data(mlp):
    assert mlp.request("/v2/models/other/infer", b"{}")[0] == 404
    x = torch.zeros(2, 32)
    nested = {"inputs": [{"name": "x", "shape": [2, 32], "datatype": "FP32", "data": x.tolist()}]}
    status, _, raw = mlp.request(f"/v2/models/{mlp.name}/infer", json.dumps(nested).encode())
    assert status == 200 and json.loads(raw)["outputs"][0]["shape"] == [2, 10]


def test_server_metadata_openapi_and_metrics(mlp):
    assert json.loads(mlp.request("/v2")[2])["extensions"] == ["binary_tensor_data"]
    schema = json.loads(mlp.request("/openapi.json")[2])
    assert "requestBody" in schema["paths"]["/v2/models/{model_name}/infer"]["post"]
    mlp.infer(torch.zeros(1, 32))
    metrics = mlp.request("/metrics")[2].decode()
    assert 'samebits_requests_total{status="200"}' in metrics and "samebits_batch_rows_bucket" in metrics


def test_a_large_body_is_413(moody):
    big = json.dumps(
        {"inputs": [{"name": "x", "shape": [2000, 8], "datatype": "FP32", "data": [0.5] * 16000}]}
    ).encode()
    code, _, raw = moody.request(f"/v2/models/{moody.name}/infer", big)
    assert code == 413 and "max-body-mb" in json.loads(raw)["error"]


def row(marker: float) -> torch.Tensor:
    x = torch.full((1, 8), 0.25)
    x[0, 0] = marker
    return x


def test_a_failing_forward_fails_only_its_batch(moody):
    status, answer = moody.infer(row(13.0))
    assert status == 500 and "row marked to fail" in answer["error"]
    assert moody.infer(row(0.5))[0] == 200  # the server is still up


def test_a_full_queue_is_503_and_a_request_queued_too_long_is_504(moody):
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        first = pool.submit(moody.infer, row(7.0))  # keeps the worker busy for 0.5 s
        time.sleep(0.1)
        rest = [pool.submit(moody.infer, row(0.5)) for _ in range(10)]
        statuses = [f.result(timeout=60)[0] for f in rest]
        assert first.result(timeout=60)[0] == 200
    assert 503 in statuses  # more rows than --max-queue 6
    assert 504 in statuses  # queued behind 0.5 s of work with --timeout-s 0.3
    assert set(statuses) <= {503, 504}
    assert moody.infer(row(0.5))[0] == 200


def test_sigterm_drains_requests_in_flight_and_exits_0():
    server = Server(f"{MODELS}:moody", "--max-batch-size", "4")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(server.infer, row(7.0)) for _ in range(3)]
        time.sleep(0.2)
        server.proc.send_signal(signal.SIGTERM)
        answers = [f.result(timeout=60) for f in slow]
    assert [status for status, _ in answers] == [200, 200, 200]
    assert server.proc.wait(timeout=60) == 0


def test_malformed_json_never_gives_a_5xx(mlp):
    hypothesis = pytest.importorskip("hypothesis", reason="the fuzz test uses hypothesis")
    st = hypothesis.strategies
    scalars = st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats(allow_nan=False) | st.text(max_size=8)
    values = st.recursive(
        scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=12
    )
    tensor = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["x", "y", ""]) | st.text(max_size=3),
            "shape": values | st.lists(st.integers(-1, 40), max_size=3),
            "datatype": st.sampled_from(["FP32", "INT64", "BOOL", "FP9"]) | values,
            "data": values,
        },
    )
    bodies = (
        st.fixed_dictionaries(
            {"inputs": st.lists(tensor | values, max_size=3)},
            optional={"outputs": values, "id": values, "parameters": values},
        )
        | values
    )

    seen: list[int] = []

    @hypothesis.settings(max_examples=120, deadline=None, database=None)
    @hypothesis.given(bodies)
    def fuzz(body):
        code = mlp.request(
            f"/v2/models/{mlp.name}/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )[0]
        seen.append(code)
        assert code < 500, body

    fuzz()
    assert len(seen) >= 100 and mlp.infer(torch.zeros(1, 32))[0] == 200


def test_the_app_mounts_inside_an_existing_fastapi_app(reference):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    import serve_models
    from samebits.serve.server import build

    model, example = serve_models.mlp()
    served, predictor, _ = build(model, example)
    parent = FastAPI()

    @parent.get("/hello")
    def hello():
        return {"hello": "world"}

    parent.mount("/ml", served)
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(3))
    body = {"inputs": [{"name": "x", "shape": [3, 32], "datatype": "FP32", "data": x.reshape(-1).tolist()}]}
    try:
        with TestClient(parent) as client:
            assert client.get("/hello").json() == {"hello": "world"}
            answer = client.post(f"/ml/v2/models/{served.state.model_name}/infer", json=body)
        assert answer.status_code == 200
        got = as_tensor(answer.json())
        assert all(torch.equal(got[i], reference.predict_one(x[i])) for i in range(3))
    finally:
        predictor.close()


def test_the_standalone_server_answers_infer_in_front_of_fastapi(reference):
    """``samebits serve`` runs ``app.state.asgi``: infer is answered before FastAPI's middleware
    (bits of predict_one, errors in the protocol's shape); every other route goes on to FastAPI."""
    from fastapi.testclient import TestClient

    import serve_models
    from samebits.serve.server import build

    model, example = serve_models.mlp()
    app, predictor, _ = build(model, example)
    x = torch.randn(2, 32, generator=torch.Generator().manual_seed(5))
    body = {"id": "a", "inputs": [{"name": "x", "shape": [2, 32], "datatype": "FP32", "data": x.reshape(-1).tolist()}]}
    path = f"/v2/models/{app.state.model_name}/infer"
    reached: list[str] = []

    class Spy:  # outermost of FastAPI's user middleware: what reaches FastAPI's stack
        def __init__(self, inner):
            self.inner = inner

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                reached.append(scope["path"])
            await self.inner(scope, receive, send)

    app.add_middleware(Spy)
    try:
        with TestClient(app.state.asgi) as front:
            first = front.post(path, json=body)
            assert front.post(path, content=b"{").status_code == 400
            assert reached == []  # FastAPI never ran
            assert front.get("/v2/health/live").status_code == 200 and reached == ["/v2/health/live"]
        assert first.status_code == 200 and first.json()["id"] == "a"
        got = as_tensor(first.json())
        assert all(torch.equal(got[i], reference.predict_one(x[i])) for i in range(2))
    finally:
        predictor.close()


def test_middleware_added_to_the_app_guards_infer_too():
    """serve() runs the short path in front of FastAPI only while the app has no middleware of the
    user's: once some is added (authentication here), infer requests pass through it as well."""
    from fastapi.testclient import TestClient
    from starlette.responses import JSONResponse

    import serve_models
    from samebits.serve.app import front
    from samebits.serve.server import build

    model, example = serve_models.mlp()
    app, predictor, _ = build(model, example)
    try:
        assert front(app) is app.state.asgi

        @app.middleware("http")
        async def authenticate(request, call_next):
            if request.headers.get("authorization") != "Bearer secret":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            return await call_next(request)

        assert front(app) is app
        body = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": [0.0] * 32}]}
        path = f"/v2/models/{app.state.model_name}/infer"
        with TestClient(front(app)) as client:
            assert client.post(path, json=body).status_code == 401
            assert client.post(path, json=body, headers={"Authorization": "Bearer secret"}).status_code == 200
        # gRPC calls would not pass through HTTP middleware: refused beside it, before serving
        from samebits.errors import UserError
        from samebits.serve.options import ServeOptions
        from samebits.serve.server import serve

        with pytest.raises(UserError, match="grpc_port cannot be served beside middleware added to the app"):
            serve(app, ServeOptions(port=0, grpc_port=0))
    finally:
        predictor.close()


def test_the_served_fingerprint_digest_is_the_predict_manifests(tmp_path):
    """One name, one meaning: ``fingerprint_sha256`` is the bit-relevant digest in both places."""
    import numpy as np
    from fastapi.testclient import TestClient

    from samebits.measure.threads import num_threads
    from samebits.offline import predict
    from samebits.serve.options import ServeOptions
    from samebits.serve.server import build

    np.save(tmp_path / "x.npy", np.zeros((4, 256), dtype="float32"))
    predict("demo:mlp", [str(tmp_path / "x.npy")], tmp_path / "out", cache_dir=tmp_path / "cache")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    with num_threads(torch.get_num_threads()):  # serve's --threads is set for good: put back after
        app, predictor, _ = build("demo:mlp", options=ServeOptions(threads=manifest["threads"]["build"]))
    try:
        with TestClient(app) as client:
            served = client.get("/v2/models/mlp").json()["parameters"]["samebits"]
    finally:
        predictor.close()
    assert served["fingerprint_sha256"] == manifest["fingerprint_sha256"]
    assert len(served["fingerprint_sha256"]) == 64


def test_golden_self_check_decides_readiness(tmp_path):
    golden = tmp_path / "mlp.safetensors"
    recorded = subprocess.run(
        [sys.executable, "-m", "samebits", "record", f"{MODELS}:mlp", "-o", str(golden), "--runtime", "predictor"],
        capture_output=True,
        text=True,
        env=scrubbed_env(),
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    same = Server(f"{MODELS}:mlp", "--golden", str(golden))
    other = Server(f"{MODELS}:mlp_retrained", "--golden", str(golden), "--name", "mlp")
    try:
        assert same.request("/v2/health/ready")[0] == 200
        status, _, raw = other.request("/v2/health/ready")
        assert status == 503 and "row 0 output <output> differs from the golden" in json.loads(raw)["reason"]
        assert other.request("/v2/models/mlp/ready")[0] == 503
        assert other.infer(torch.zeros(1, 32))[0] == 200  # not ready, but it answers, to inspect
    finally:
        assert same.stop() == 0 and other.stop() == 0
    plain = tmp_path / "plain.safetensors"
    subprocess.run(
        [sys.executable, "-m", "samebits", "record", f"{MODELS}:mlp", "-o", str(plain)],
        check=True,
        env=scrubbed_env(),
        capture_output=True,
        timeout=120,
    )
    refused = subprocess.run(
        [sys.executable, "-m", "samebits", "serve", f"{MODELS}:mlp", "--port", "0", "--golden", str(plain)],
        capture_output=True,
        text=True,
        env=scrubbed_env(),
        timeout=120,
    )
    assert refused.returncode == 2 and "--runtime predictor" in refused.stderr


def test_an_isolated_worker_whose_forward_never_returns_is_killed_and_restarted():
    server = Server(f"{MODELS}:stuck", "--isolate", "--max-batch-size", "4", "--forward-timeout-s", "0.3")
    try:
        before = server.infer(row(0.5))
        assert before[0] == 200
        code, answer = server.infer(row(7.0))  # never returns in the worker
        assert code == 503 and "--forward-timeout-s" in answer["error"]
        status, _, raw = server.request("/v2/health/ready")
        assert status == 503 and "restarting the model's worker" in json.loads(raw)["reason"]
        deadline = time.monotonic() + 60
        while server.request("/v2/health/ready")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.request("/v2/health/ready")[0] == 200
        after = server.infer(row(0.5))
        assert after == before  # the new worker has the first one's plan: the same bits
    finally:
        assert server.stop() == 0
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "samebits.child serve" not in ps, "a worker outlived the server"


def test_a_forward_that_hangs_gets_503_and_the_server_is_not_ready_until_it_returns():
    server = Server(f"{MODELS}:moody", "--max-batch-size", "4", "--forward-timeout-s", "0.2")
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            stuck = pool.submit(server.infer, row(7.0))  # sleeps 0.5 s
            time.sleep(0.35)
            status, _, raw = server.request("/v2/health/ready")
            assert status == 503 and "a forward has been running" in json.loads(raw)["reason"]
            code, answer = stuck.result(timeout=30)
        assert code == 503 and "--forward-timeout-s" in answer["error"]
        deadline = time.monotonic() + 10
        while server.request("/v2/health/ready")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.request("/v2/health/ready")[0] == 200 and server.infer(row(0.5))[0] == 200
    finally:
        assert server.stop() == 0


def test_variable_length_inputs_are_padded_to_their_bucket_and_answered_with_load_free_bits():
    pytest.importorskip("transformers", reason="the padded-input test serves a tiny BERT (extra 'real')")
    from samebits.serve.options import ServeOptions
    from samebits.serve.server import served

    spec = f"{HERE / 'real_models.py'}:bert"
    pads = ("--pad", "input_ids:1", "--pad", "attention_mask:1", "--pad-lengths", "8,16")
    server = Server(spec, "--max-batch-size", "8", *pads)

    def body(ids: list[int], mask_length: int | None = None) -> bytes:
        n = len(ids) if mask_length is None else mask_length
        inputs = [
            {"name": "input_ids", "shape": [1, len(ids)], "datatype": "INT64", "data": ids},
            {"name": "attention_mask", "shape": [1, n], "datatype": "INT64", "data": [1] * n},
        ]
        return json.dumps({"inputs": inputs}).encode()

    def ask(ids: list[int]) -> tuple[int, dict]:
        status, _, raw = server.request(
            f"/v2/models/{server.name}/infer", body(ids), {"Content-Type": "application/json"}
        )
        return status, json.loads(raw)

    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, 512, (n,), generator=gen).tolist() for n in (5, 8, 11, 16, 3, 9) * 3]
    try:
        alone = [ask(p) for p in prompts]
        assert all(code == 200 for code, _ in alone)
        shapes = {o["name"]: o["shape"] for o in alone[2][1]["outputs"]}
        assert shapes == {"last_hidden_state": [1, 11, 64], "pooler_output": [1, 64]}  # cut back to 11
        for _ in range(2):  # mixed lengths at once: batches form per bucket, the bits do not move
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                together = list(pool.map(ask, prompts))
            assert together == alone
        too_long = ask(list(range(1, 18)))
        assert too_long[0] == 400 and "outside 1..16" in too_long[1]["error"]
        status, _, raw = server.request(f"/v2/models/{server.name}/infer", body([1, 2, 3], 4))
        assert status == 400 and "differ in length" in json.loads(raw)["error"]
    finally:
        assert server.stop() == 0
    # and the bits are those of the sample padded to its bucket, alone, through that bucket's Predictor
    options = ServeOptions(max_batch_size=8, pad=("input_ids:1", "attention_mask:1"), pad_lengths=(8, 16))
    one = served(spec, None, options)
    predictor, signature = one.runner, one.signature
    assert one.key is not None and one.runner.plan.sizes_by_length.keys() == {8, 16}
    try:
        ids = torch.tensor([prompts[2]])
        padded = signature.buckets.pad({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, 16)
        named = signature.named_outputs(predictor.predict(signature.arguments(padded)))
        expected = named["last_hidden_state"][:, :11].reshape(-1).tolist()
        got = next(o for o in alone[2][1]["outputs"] if o["name"] == "last_hidden_state")["data"]
        assert got == expected
    finally:
        predictor.close()


def test_a_model_whose_rows_are_coupled_answers_each_request_as_its_own_batch():
    import check_models

    server = Server(f"{HERE / 'check_models.py'}:self_similarity", "--max-batch-size", "8")
    model, _ = check_models.self_similarity()
    xs = [torch.randn(2, 16, generator=torch.Generator().manual_seed(i)) for i in range(6)]
    try:
        metadata = json.loads(server.request(f"/v2/models/{server.name}")[2])["parameters"]["samebits"]
        assert metadata["invariance"] == "whole"
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(server.infer, xs, timeout=120))
        for x, (code, answer) in zip(xs, answers):
            assert code == 200 and answer["outputs"][0]["shape"] == [2, 2]
            assert torch.equal(torch.tensor(answer["outputs"][0]["data"]).reshape(2, 2), model(x).detach())
    finally:
        assert server.stop() == 0


def test_every_batcher_of_a_runner_takes_the_plans_facts():
    """The HTTP app passed joins=False for coupled rows and the Ray replicas did not (a CLIP there
    got joined requests and other answers): both make their batcher from the runner now."""
    import dataclasses

    from samebits.serve.batcher import Batcher
    from samebits.serve.options import ServeOptions

    @dataclasses.dataclass
    class Plan:
        scheme: str

    class Runner:
        def __init__(self, scheme: str) -> None:
            self.plan = Plan(scheme)

        def predict(self, inputs):
            return inputs

    assert not Batcher.for_runner(Runner("whole"), ServeOptions()).joins
    assert Batcher.for_runner(Runner("class"), ServeOptions()).joins
