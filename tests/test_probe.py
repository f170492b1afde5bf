"""`samebits probe`: real servers started here on 127.0.0.1 (each in its own process group, killed
at teardown), probed by the CLI in a fresh process: samebits serve (REST, binary, gRPC), LitServe
with batching, plain FastAPI, replicas under different portable levels, and servers that break
(refuse, close, 5xx, another protocol). Every load is short and bounded in count and time."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, scrubbed_env

pytest.importorskip("fastapi", reason="the probed servers need the serve extra: pip install 'samebits[serve]'")

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "probe_servers.py"
MODELS = HERE / "serve_models.py"
READY_S = 120.0
LOAD = ("--concurrency", "1,16", "--requests", "96", "--timeout-s", "90", "--request-timeout-s", "20")


class Process:
    """A server in its own session (its workers die with it); stderr kept in a file."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.log = open(os.devnull, "w")  # noqa: SIM115 (closed in stop)
        self.err_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-test-{os.getpid()}-{id(self)}.log"
        self.err = open(self.err_path, "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=self.err, env=env or scrubbed_env(), start_new_session=True, text=True
        )

    def text(self) -> str:
        return self.err_path.read_text(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()
        self.err.close()
        self.err_path.unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, what: str, proc: Process, limit_s: float = READY_S):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            raise AssertionError(f"{what} exited: {proc.text()[-2000:]}")
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} was not ready within {limit_s:.0f} s: {proc.text()[-2000:]}")


@contextlib.contextmanager
def samebits_serve(*args: str, env: dict[str, str] | None = None):
    """``samebits serve`` of tests/serve_models.py's MLP; yields (REST base URL, gRPC address or None)."""
    proc = Process(
        [sys.executable, "-m", "samebits", "serve", f"{MODELS}:mlp", "--port", "0", "--max-batch-size", "16", *args],
        env,
    )
    try:

        def announced():
            line = next((x for x in proc.text().splitlines() if x.startswith("serving ")), None)
            if line is None:
                return None
            grpc = line.rsplit("gRPC on ", 1)[1].strip() if "gRPC on " in line else None
            return line.split()[3], grpc

        yield wait_until(announced, "samebits serve", proc)
    finally:
        proc.stop()


@contextlib.contextmanager
def peer(kind: str, model: str = "mlp"):
    """A server of tests/probe_servers.py; yields its base URL once /health answers."""
    port = free_port()
    proc = Process([sys.executable, str(SERVERS), kind, "--port", str(port), "--model", model])
    base = f"http://127.0.0.1:{port}"

    def healthy():
        with contextlib.suppress(OSError), urllib.request.urlopen(base + "/health", timeout=2) as r:
            return r.status == 200
        return False

    try:
        wait_until(healthy, kind, proc)
        yield base
    finally:
        proc.stop()


def probe(*args: str, timeout: float = 150) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """``samebits probe ARGS --json FILE``: the process and its report."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-{os.getpid()}-{time.monotonic_ns()}.json"
    try:
        result = run_cli("probe", *args, "--json", str(out), timeout=timeout)
        report = json.loads(out.read_text()) if out.exists() else None
    finally:
        out.unlink(missing_ok=True)
    return result, report


def schema() -> dict:
    return json.loads(resources.files("samebits").joinpath("schemas/probe.schema.json").read_text())


def axis(report: dict, name: str) -> dict:
    return next(a for a in report["axes"] if a["axis"] == name)


@pytest.fixture(scope="module")
def served():
    with samebits_serve("--grpc-port", "0") as urls:
        yield urls


# -- real servers --------------------------------------------------------------------------------
def test_samebits_serve_keeps_every_answers_bits_on_every_axis(served):
    import jsonschema

    base, _ = served
    result, report = probe(f"{base}/v2/models/mlp", *LOAD)
    assert result.returncode == 0, result.stdout + result.stderr
    jsonschema.validate(report, schema())
    assert report["kind"] == "probe" and report["exit_code"] == 0
    assert [a["verdict"] for a in report["axes"]] == ["identical", "identical", "identical", "skipped"]
    cells = axis(report, "loaded")["cells"]
    assert [c["concurrency"] for c in cells] == [1, 16]
    assert all(c["probe_answers"] > 0 and c["differing"] == 0 and c["client_cpu_ms_per_request"] > 0 for c in cells)
    assert "random rows (seed 0) of the served inputs x FP32[-1, 32]" in report["inputs"]  # from the metadata
    assert "client CPU" in result.stdout  # the client's own cost per request is printed


def test_grpc_and_binary_rest_answers_have_the_same_bits(served):
    base, grpc = served
    result, report = probe(f"grpc://{grpc}/v2/models/mlp", *LOAD, "--replicas", f"{base}/v2/models/mlp", "--binary")
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["protocol"] == "v2-grpc"
    replicas = axis(report, "replicas")
    assert replicas["verdict"] == "identical" and replicas["groups"] == [["quiet run", f"{base}/v2/models/mlp"]]


@pytest.mark.serial  # load on loopback
def test_litserve_batching_changes_answers_under_load_and_names_the_concurrency():
    """A model whose output carries its batch size: LitServe's batches change it on any CPU."""
    pytest.importorskip("litserve", reason="pip install -c constraints.txt litserve==0.2.19")
    page = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-{os.getpid()}.html"
    with peer("litserve", "batch_sized") as base:
        result, report = probe(
            f"{base}/v2/models/batch_sized", "--model", f"{SERVERS}:batch_sized", *LOAD, "--html", str(page)
        )
    assert result.returncode == 1, result.stdout + result.stderr
    html = page.read_text()
    page.unlink()
    assert "Answers change under load from concurrency 16" in html and "<h2>Under load</h2>" in html
    loaded = axis(report, "loaded")
    assert loaded["verdict"] == "diverged" and loaded["starts_at"] == 16
    c1, c16 = loaded["cells"]
    assert c1["differing"] == 0 and c16["differing"] > 0
    steps = loaded["first"]["max_abs"] / 1e-3  # batch sizes apart, x 1e-3
    assert loaded["first"]["output"] == "output_0" and round(steps) >= 1 and abs(steps - round(steps)) < 1e-3
    assert axis(report, "quiet")["verdict"] == "identical"
    assert "from concurrency 16" in result.stdout.splitlines()[0]


@pytest.mark.serial  # load on loopback
def test_litserve_batching_of_a_real_mlp_is_measured():
    pytest.importorskip("litserve", reason="pip install -c constraints.txt litserve==0.2.19")
    with peer("litserve", "mlp") as base:
        result, report = probe(f"{base}/v2/models/mlp", "--model", f"{SERVERS}:mlp", *LOAD)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    if result.returncode == 0:
        pytest.skip("this CPU's GEMMs give a row the same bits at every batch size LitServe ran")
    assert axis(report, "loaded")["starts_at"] == 16


@pytest.mark.serial  # load on loopback
def test_plain_fastapi_answers_alike_under_load():
    with peer("fastapi", "mlp") as base:
        result, report = probe(f"{base}/v2/models/mlp", "--model", f"{SERVERS}:mlp", *LOAD, "--client", "python")
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["filler"] == "python" and all(c["client"] == "python" for c in axis(report, "loaded")["cells"])


def test_replicas_under_different_portable_levels_are_grouped_by_their_bits():
    """Two samebits serve replicas, one pinned to the x86-64-v2 baseline and one native: the
    replica axis diverges exactly where their answers to one row differ (measured here)."""
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        pytest.skip("portable levels are x86-64 only")
    with samebits_serve() as (native, _), samebits_serve("--portable", "x86-64-v2") as (baseline, _):
        rows = np.random.default_rng(0).standard_normal((1, 32)).astype(np.float32)
        body = json.dumps(
            {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": rows.ravel().tolist()}]}
        )
        answers = []
        for base in (native, baseline):
            req = urllib.request.Request(
                f"{base}/v2/models/mlp/infer", body.encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=30) as r:
                answers.append(json.loads(r.read())["outputs"][0]["data"])
        result, report = probe(
            f"{native}/v2/models/mlp",
            "--concurrency",
            "1",
            "--requests",
            "16",
            "--replicas",
            f"{baseline}/v2/models/mlp",
        )
    replicas = axis(report, "replicas")
    if answers[0] == answers[1]:
        assert result.returncode == 0 and replicas["verdict"] == "identical"
        pytest.skip("on this CPU the x86-64-v2 level gives this MLP the native bits")
    assert result.returncode == 1, result.stdout + result.stderr
    assert replicas["verdict"] == "diverged"
    assert replicas["groups"] == [["quiet run"], [f"{baseline}/v2/models/mlp"]]
    assert "Replicas disagree" in report["headline"]


# -- endpoints that cannot be probed: one line, exit 2 -------------------------------------------
@contextlib.contextmanager
def http_server(handler: type[http.server.BaseHTTPRequestHandler]):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Fails(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self._answer(500, b'{"error": "model crashed"}')

    do_POST = do_GET

    def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Html(Fails):
    def do_GET(self):
        self._answer(200, b"<html>hello</html>", "text/html")

    do_POST = do_GET


@contextlib.contextmanager
def closing_server(close: bool = True):
    """Accepts every connection and closes it at once (or holds it open, never answering), for a
    bounded time."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    stop = threading.Event()
    held = []

    def run():
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = sock.accept()
                if close:
                    conn.close()
                else:
                    held.append(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        sock.close()


def one_line_exit_2(result: subprocess.CompletedProcess[str], says: str) -> None:
    lines = [x for x in result.stderr.strip().splitlines() if not x.startswith("samebits: probing")]
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1 and lines[0].startswith("samebits: error: "), result.stderr
    assert says in lines[0], lines[0]


def test_a_bad_url_a_refused_port_a_closing_server_and_5xx_are_one_line_exit_2():
    one_line_exit_2(run_cli("probe", "http://127.0.0.1:8000/predict"), "names no model")
    one_line_exit_2(run_cli("probe", "ftp://127.0.0.1/v2/models/m"), "is not http://")
    one_line_exit_2(run_cli("probe", f"http://127.0.0.1:{free_port()}/v2/models/m"), "connection refused")
    with closing_server() as base:
        one_line_exit_2(run_cli("probe", f"{base}/v2/models/m", "--timeout-s", "30"), "closed the connection")
    with closing_server(close=False) as base:
        one_line_exit_2(run_cli("probe", f"{base}/v2/models/m", "--request-timeout-s", "1"), "no answer from 127.0.0.1")
    with http_server(Fails) as base:
        one_line_exit_2(run_cli("probe", f"{base}/v2/models/m"), "answered 500 to GET /v2/models/m: model crashed")


def test_the_whole_run_is_bounded_by_timeout_s(served):
    base, _ = served
    started = time.monotonic()
    result, report = probe(
        f"{base}/v2/models/mlp", "--concurrency", "1,16,64", "--requests", "100000", "--timeout-s", "2"
    )
    assert result.returncode == 2 and time.monotonic() - started < 60, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "--timeout-s 2 s ran out" in said or "--timeout-s ran out" in said


def test_a_protocol_mismatch_is_one_line_exit_2(served, tmp_path):
    base, _ = served
    rows = tmp_path / "rows.npy"
    np.save(rows, np.zeros((2, 4), dtype=np.float32))
    one_line_exit_2(
        run_cli("probe", f"{base}/v1/completions", "--model-name", "mlp"), "answered 404 to POST /v1/completions"
    )
    one_line_exit_2(run_cli("probe", f"grpc://{base.split('//')[1]}/v2/models/mlp", "--request-timeout-s", "5"), "gRPC")
    with http_server(Html) as html:
        one_line_exit_2(
            run_cli("probe", f"{html}/v2/models/m", "--inputs", str(rows)),
            "does not answer the Open Inference Protocol",
        )


# -- the parts, without servers ------------------------------------------------------------------
def test_answers_are_compared_by_bits_not_values():
    from samebits.probe import wire
    from samebits.probe.compare import difference, groups

    def ans(values, datatype="FP32"):
        return (wire.from_array("y", np.array(values, dtype=np.float64).reshape(1, -1), datatype),)

    assert difference(ans([0.0, 1.0]), ans([0.0, 1.0])) is None
    nan = ans([float("nan"), 1.0])
    assert difference(nan, nan) is None  # the same NaN bits are the same answer
    zero = difference(ans([0.0, 1.0]), ans([-0.0, 1.0]))
    assert zero is not None and zero.element == (0, 0) and zero.count == 1 and zero.max_abs == 0.0
    d = difference(ans([1.0, 2.0, 3.0]), ans([1.0, 2.5, 3.25]))
    assert d is not None and (d.element, d.count, d.size, d.max_abs) == ((0, 1), 2, 3, 0.5)
    assert d.line() == "output y[0, 1]: 2.0 then 2.5 (2 of 3 values differ, max abs diff 0.5)"
    assert difference(ans([1.0]), ans([1.0], "FP64")).element is None  # another datatype
    assert groups([[ans([1.0])], [ans([2.0])], [ans([1.0])]]) == [[0, 2], [1]]


def test_v2_bodies_and_answers_round_trip_json_and_binary():
    from samebits.probe import wire

    x = wire.from_array("x", np.array([[0.1, -2.5, 3e-8]], dtype=np.float32), "FP32")
    ids = wire.from_array("ids", np.array([[1, 2**40]]), "INT64")
    body, headers = wire.request((x, ids), binary=False)
    sent = json.loads(body)
    assert headers["Content-Type"] == "application/json" and sent["inputs"][1]["data"] == [1, 2**40]
    answer_json = json.dumps({"outputs": [{**s, "data": s["data"]} for s in sent["inputs"]]}).encode()
    assert wire.answer(answer_json, None) == (x, ids)  # JSON floats come back with their float32 bits
    body, headers = wire.request((x, ids), binary=True)
    head = json.loads(body[: int(headers[wire.HEADER_LENGTH])])
    assert head["parameters"] == {"binary_data_output": True} and head["inputs"][0]["parameters"] == {
        "binary_data_size": 12
    }
    outputs = [{k: v for k, v in s.items()} for s in head["inputs"]]
    text = json.dumps({"outputs": outputs}).encode()
    assert wire.answer(text + x.raw + ids.raw, str(len(text))) == (x, ids)
    bf16 = wire.from_array("b", np.array([1.5, -0.25], dtype=np.float32), "BF16")
    assert bf16.raw == bytes.fromhex("c03f80be") and bf16.values().tolist() == [1.5, -0.25]
    nested = b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]}]}'
    assert wire.answer(nested, None)[0].values().tolist() == [[1, 2], [3, 4]]
    with pytest.raises(wire.WireError, match="holds 4 values, 'data' has 3"):
        wire.answer(b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3]}]}', None)


def test_urls_name_the_protocol_and_the_model():
    from samebits.probe.clients import ProbeError, endpoint

    ep = endpoint("http://h:8000/v2/models/mlp/versions/1/infer")
    assert (ep.protocol, ep.host, ep.port, ep.model, ep.path) == ("v2", "h", 8000, "mlp", "/v2/models/mlp/versions/1")
    assert endpoint("grpc://h:8001/v2/models/m").protocol == "v2-grpc"
    assert endpoint("http://h/v1/chat/completions", model_name="gpt").model == "gpt"
    for url, says in [
        ("http://h:8000/", "names no model"),
        ("http://h/v1/models", "give the route"),
        ("http://h:99999/v2/models/m", "no valid port"),
    ]:
        with pytest.raises(ProbeError, match=says):
            endpoint(url)
    with pytest.raises(ProbeError, match="takes a grpc:// URL"):
        endpoint("http://h/v2/models/m", "v2-grpc")


def test_the_schedule_spreads_every_probe_input_through_the_filler():
    from samebits.probe.load import schedule

    items = schedule(probes=8, fillers=32, requests=96)
    probes = [k for is_probe, k in items if is_probe]
    assert len(items) == 96 and len(probes) == 24 and set(probes) == set(range(8))
    gaps = np.diff([i for i, (is_probe, _) in enumerate(items) if is_probe])
    assert gaps.min() >= 3 and gaps.max() <= 5  # spread, not bunched
    assert len(schedule(probes=8, fillers=32, requests=4)) == 8  # every probe input at least once


def test_openai_answers_give_text_tokens_and_logprobs():
    from samebits.probe.clients import completion

    text, tokens, logprobs = completion(
        {"choices": [{"text": " Paris", "logprobs": {"tokens": [" Par", "is"], "token_logprobs": [-0.5, None]}}]},
        chat=False,
    )
    assert text.values().tolist() == [" Paris"] and tokens.values().tolist() == [" Par", "is"]
    assert logprobs.values()[0] == -0.5 and np.isnan(logprobs.values()[1])
    chat = completion(
        {"choices": [{"message": {"content": "hi"}, "logprobs": {"content": [{"token": "hi", "logprob": -1.25}]}}]},
        chat=True,
    )
    assert [t.name for t in chat] == ["text", "tokens", "logprobs"] and chat[2].values().tolist() == [-1.25]
    assert [t.name for t in completion({"choices": [{"message": {"content": "x"}}]}, chat=True)] == ["text"]


# -- OpenAI-compatible completions ---------------------------------------------------------------
OPENAI_LOAD = ("--concurrency", "1,16", "--requests", "32", "--max-tokens", "4", "--connections", "1")


@pytest.mark.serial  # load on loopback
def test_litserve_openai_spec_with_batching_changes_gpt2_answers_under_load():
    """Prompts batched left-padded with positions counted from the padding (a common flaw of
    hand-written batched loops): a prompt's answer depends on its batch, on any CPU."""
    pytest.importorskip("litserve", reason="pip install -c constraints.txt litserve==0.2.19")
    pytest.importorskip("transformers")
    with peer("litserve-openai") as base:
        result, report = probe(f"{base}/v1/chat/completions", *OPENAI_LOAD)
    assert result.returncode == 1, result.stdout + result.stderr
    loaded = axis(report, "loaded")
    assert loaded["starts_at"] == 16 and loaded["first"]["output"] == "text"
    assert "(character " in loaded["first"]["expected"]  # where in the text the answers part
    assert axis(report, "quiet")["verdict"] == "identical"


def test_openai_completions_with_logprobs_from_an_unbatched_server_keep_their_bits():
    pytest.importorskip("transformers")
    with peer("fastapi-openai") as base:
        result, report = probe(f"{base}/v1/completions", *OPENAI_LOAD)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["outputs"] == ["text BYTES[1]", "tokens BYTES[4]", "logprobs FP64[4]"]
    assert report["inputs"] == "8 built-in prompts"


# -- across a restart ----------------------------------------------------------------------------
def ask_one_row(base: str) -> list[float]:
    row = np.random.default_rng(1).standard_normal(32).astype(np.float32).tolist()
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": row}]}).encode()
    req = urllib.request.Request(f"{base}/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["outputs"][0]["data"]


def test_restart_axis_runs_the_users_command_and_compares_the_answers_after_it(tmp_path):
    """samebits serve on a fixed port, restarted by a command of the user's kind (stop the
    server, start it again in the background): into the same server the bits stay; into another
    portable level they change where one row's answer says they do (measured here)."""
    import shlex

    port, pidfile = free_port(), tmp_path / "server.pid"
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "samebits", "serve", f"{MODELS}:mlp", "--port", str(port), "--max-batch-size", "16"]
    first = Process(argv)
    pidfile.write_text(str(first.proc.pid))

    def ready():
        with contextlib.suppress(OSError), urllib.request.urlopen(base + "/v2/health/ready", timeout=2) as r:
            return r.status == 200
        return False

    def restart_cmd(*extra: str) -> str:
        return shlex.join([sys.executable, str(SERVERS), "restart", str(pidfile), "--", *argv, *extra])

    light = ("--concurrency", "1", "--requests", "16", "--connections", "0", "--restart-wait-s", "120")
    try:
        wait_until(ready, "samebits serve", first)
        before = ask_one_row(base)
        result, report = probe(f"{base}/v2/models/mlp", *light, "--restart-cmd", restart_cmd())
        assert result.returncode == 0, result.stdout + result.stderr
        assert axis(report, "restart")["verdict"] == "identical" and axis(report, "replicas")["verdict"] == "skipped"
        assert int(pidfile.read_text()) != first.proc.pid  # it really ran another server
        result, report = probe(f"{base}/v2/models/mlp", *light, "--restart-cmd", restart_cmd("--portable", "x86-64-v2"))
        changed = ask_one_row(base) != before
        assert result.returncode == (1 if changed else 0), result.stdout + result.stderr
        assert axis(report, "restart")["verdict"] == ("diverged" if changed else "identical")
        failed, _ = probe(f"{base}/v2/models/mlp", *light, "--restart-cmd", "echo nope >&2; exit 3")
        assert failed.returncode == 2 and "--restart-cmd exited with 3: nope" in failed.stdout
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
        first.stop()
