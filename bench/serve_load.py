"""``samebits serve`` under load, against LitServe's batching and plain FastAPI, side by side in one run.

Setup (docs/serve.md "Load"): ``apt-get install wrk nghttp2-client`` (the compiled load clients)
and ``pip install -c constraints.txt -e '.[serve]' litserve==0.2.19``. Then:

    python bench/serve_load.py --models medium_mlp --n 3000 --rounds 3   # the issue's targets
    python bench/serve_load.py --quick                                   # 300 requests, c=1 and 16, the two MLPs

Every server serves the same model (bench/serve_models.py) over the Open Inference Protocol, one
row per request, as a subprocess on 127.0.0.1, at ``--max-batch`` (32): ``samebits`` (JSON),
``samebits-binary`` (the binary tensor extension both ways), ``samebits-grpc`` (``--grpc-port``),
``samebits-isolate`` (``--isolate``), LitServe (its own batching, 5 ms) and plain FastAPI (one
forward per request on the event loop).

The default client is ``wrk`` (bench/wrk_load.py): one thread, 32 rotating bodies, every answer
checked inside the client against the quiet answer to its body (fetched one request at a time
first); ``samebits-grpc`` is driven by ``h2load`` (bench/h2load_grpc.py), its bits checked with a
gRPC client before and after the load. ``--client python`` keeps the asyncio + httpx client (N
distinct rows, each checked against the row run alone), which on a small machine takes a core
from the servers it measures. Per cell: req/s, p50/p99, errors, differing answers, the server's
CPU ms per request (bench/proc_cpu.py, its whole process tree), and served rows/s over the
offline Predictor's rows/s at the same batch size, measured in this process in the same round.

``--rounds R`` measures every server R times, each round starting with the next server; targets
(issue #28) are judged on the median, each round's value shown: 0 answers differ; at c=16 and
64 req/s >= 2x the better of LitServe and FastAPI, p99 <= 0.5x, CPU per request <= 0.33x
FastAPI's; served/offline >= 0.3 with JSON and >= 0.5 with binary or gRPC at c=64; at c=1 p50
within 1 ms of FastAPI's. samebits' servers, this process's references and its offline Predictor
run in MKL's strict mode (``MKL_CBWR=AUTO,STRICT``, as ``samebits serve`` starts); LitServe and
FastAPI without it, as their users run them (with ``--client python`` they inherit it, because
their answers are then checked against this process's). ``--pin`` puts the client on the first core and the servers on the
others; ``--model-threads N`` runs every server's model at N threads.
"""

# ruff: noqa: E402  (the MKL mode is set before anything imports torch)
import os

# As `samebits serve` starts (samebits.cli.strict_blas), before the first GEMM: the bench's own
# references and offline Predictor run in MKL's strict mode, as samebits' servers do. LitServe and
# FastAPI run as their users run them, without it (with wrk, whose checks compare each server with
# its own quiet answers), unless the variable was set before the bench started.
MKL_SET_BY_USER = "MKL_CBWR" in os.environ
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import datetime
import gc
import importlib.util
import json
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import h2load_grpc  # noqa: E402
import proc_cpu  # noqa: E402
import wrk_load  # noqa: E402

MODELS_FILE = HERE / "serve_models.py"
MODELS = ("small_mlp", "medium_mlp", "small_cnn")
SERVERS = ("samebits", "samebits-binary", "samebits-grpc", "samebits-isolate", "litserve", "fastapi")
CONCURRENCY = (1, 16, 64)
MAX_BATCH = 32  # --max-batch: samebits' and LitServe's, and the offline Predictor's batch size
WRK_BODIES = 32  # the wrk client rotates this many distinct one-row bodies
LITSERVE_BATCH_TIMEOUT = 0.005
ROWS_SEED = 1234
CELL_LIMIT_S = 60.0
READY_LIMIT_S = 180.0
STOP_GRACE_S = 5.0
WARMUP_REQUESTS = 64
HEADERS = {"content-type": "application/json"}
MODEL_THREADS: int | None = None  # --model-threads: every server's model runs at this many threads
SERVER_CPUS: set[int] | None = None  # --pin: the cores the servers run on (the client keeps the rest)
CLIENT_CPUS: set[int] | None = None  # --pin: the client's core
CLIENT = "wrk"  # --client: wrk (compiled, checks every answer) or python (asyncio + httpx)
SERVER_ENV: dict[str, str] = {}  # --server-env: extra variables for the servers only


# -- models and the v2 JSON body (shared by the bench and the servers it starts) -----------------
def load_factory(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """``(model in eval mode, example batch)`` from bench/serve_models.py."""
    spec = importlib.util.spec_from_file_location("serve_models", MODELS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, example = getattr(module, name)()
    return model.eval(), example


def decode_v2(body: dict[str, Any]) -> torch.Tensor:
    """The one input tensor of a v2 JSON request."""
    spec = body["inputs"][0]
    return torch.tensor(spec["data"], dtype=torch.float32).reshape(spec["shape"])


def encode_v2(name: str, output: torch.Tensor) -> dict[str, Any]:
    """A v2 JSON response with one output tensor."""
    return {
        "model_name": name,
        "outputs": [
            {"name": "output_0", "shape": list(output.shape), "datatype": "FP32", "data": output.reshape(-1).tolist()}
        ],
    }


def request_body(row: torch.Tensor, request_id: str | None = None) -> bytes:
    spec = {"name": "x", "shape": [1, *row.shape], "datatype": "FP32", "data": row.reshape(-1).tolist()}
    return json.dumps({**({"id": request_id} if request_id else {}), "inputs": [spec]}).encode()


def binary_body(row: torch.Tensor, request_id: str) -> tuple[bytes, dict[str, str]]:
    """A one-row request in the binary tensor extension (binary answer too), and its headers."""
    raw = row.contiguous().numpy().tobytes()
    spec = {"name": "x", "shape": [1, *row.shape], "datatype": "FP32", "parameters": {"binary_data_size": len(raw)}}
    head = json.dumps({"id": request_id, "inputs": [spec], "parameters": {"binary_data_output": True}}).encode()
    return head + raw, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}


def wrk_bodies(kind: str, rows: torch.Tensor) -> tuple[list[bytes], list[dict[str, str]]]:
    """The bodies (and headers) the wrk client rotates for ``kind``; ids of equal width."""
    ids = [f"{i:03d}" for i in range(len(rows))]
    if kind == "samebits-binary":
        pairs = [binary_body(r, i) for r, i in zip(rows, ids)]
        return [b for b, _ in pairs], [h for _, h in pairs]
    return [request_body(r, i) for r, i in zip(rows, ids)], [dict(HEADERS)] * len(rows)


# -- the comparison servers, run by this file in a subprocess (--serve KIND) ---------------------
def serve_fastapi(name: str, port: int) -> None:
    # (no `from __future__ import annotations` in this file: FastAPI reads the handler's annotations)
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    model, _ = load_factory(name)
    app = FastAPI()

    @app.get("/v2/health/ready")
    async def ready() -> dict[str, bool]:
        return {"ready": True}

    @app.post(f"/v2/models/{name}/infer")
    async def infer(request: Request) -> JSONResponse:
        body = await request.json()
        x = decode_v2(body)
        with torch.inference_mode():
            y = model(x)
        return JSONResponse({**encode_v2(name, y), **({"id": body["id"]} if "id" in body else {})})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", workers=1)


try:
    import litserve as ls
except ImportError:  # the bench skips LitServe's rows
    ls = None

if ls is not None:

    class V2API(ls.LitAPI):
        """The v2 JSON body over LitServe's batching: one [1, D] row per request, joined with cat."""

        def __init__(self, name: str) -> None:
            super().__init__(
                max_batch_size=MAX_BATCH, batch_timeout=LITSERVE_BATCH_TIMEOUT, api_path=f"/v2/models/{name}/infer"
            )
            self.name = name

        def setup(self, device):
            self.model, _ = load_factory(self.name)

        def decode_request(self, request):
            return decode_v2(request)

        def batch(self, inputs):
            return torch.cat(inputs)

        def predict(self, x):
            with torch.inference_mode():
                return self.model(x)

        def unbatch(self, output):
            return list(output.split(1))

        def encode_response(self, output):
            return encode_v2(self.name, output)


def serve_litserve(name: str, port: int) -> None:
    server = ls.LitServer(V2API(name), accelerator="cpu", workers_per_device=1)
    server.run(host="127.0.0.1", port=port, num_api_servers=1, generate_client_file=False, log_level="warning")


# -- starting and stopping servers -------------------------------------------------------------
@dataclasses.dataclass
class Server:
    kind: str
    proc: subprocess.Popen
    log: collections.deque
    port: int | None = None
    grpc_port: int | None = None  # samebits-grpc: where its gRPC service listens
    announced: threading.Event = dataclasses.field(default_factory=threading.Event)
    note: str = ""  # samebits: its verified batch sizes

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


ANNOUNCE = re.compile(
    r"serving \S+ on http://127\.0\.0\.1:(\d+) \(verified batch sizes ([^)]*)\)(?:.*gRPC on \S+:(\d+))?"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_samebits(kind: str) -> bool:
    return kind.startswith("samebits")


def command(kind: str, model: str, port: int) -> list[str]:
    if is_samebits(kind):
        spec = f"{MODELS_FILE}:{model}"
        threads = ["--threads", str(MODEL_THREADS)] if MODEL_THREADS else []
        threads += ["--isolate"] if kind == "samebits-isolate" else []
        threads += ["--grpc-port", "0"] if kind == "samebits-grpc" else []
        return [
            sys.executable,
            "-m",
            "samebits",
            "serve",
            spec,
            "--port",
            "0",
            "--max-batch-size",
            str(MAX_BATCH),
            *threads,
        ]
    return [
        *(sys.executable, str(Path(__file__).resolve()), "--serve", kind, "--model", model, "--port", str(port)),
        *("--max-batch", str(MAX_BATCH)),  # LitServe's batch size, as samebits'
    ]


def _read_log(server: Server) -> None:
    """Keep the server's output drained (a full pipe would block it); note samebits' announcement."""
    assert server.proc.stdout is not None
    for line in server.proc.stdout:
        server.log.append(line.rstrip())
        match = ANNOUNCE.search(line)
        if match:
            server.port, server.note = int(match.group(1)), match.group(2)
            server.grpc_port = int(match.group(3)) if match.group(3) else None
            server.announced.set()


def without_mkl_mode(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "MKL_CBWR"}


def start(kind: str, model: str, env: dict[str, str]) -> Server:
    port = free_port()
    proc = subprocess.Popen(
        command(kind, model, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env if is_samebits(kind) or MKL_SET_BY_USER or CLIENT == "python" else without_mkl_mode(env),
        start_new_session=True,  # its own process group: LitServe's workers are stopped with it
        preexec_fn=(lambda: os.sched_setaffinity(0, SERVER_CPUS)) if SERVER_CPUS else None,
    )
    server = Server(kind, proc, collections.deque(maxlen=40), None if is_samebits(kind) else port)
    threading.Thread(target=_read_log, args=(server,), daemon=True).start()
    return server


def health_path(kind: str) -> str:
    return "/health" if kind == "litserve" else "/v2/health/ready"


def wait_ready(server: Server, limit_s: float = READY_LIMIT_S) -> None:
    import urllib.request

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} exited with {server.proc.returncode}: {tail(server)}")
        if server.port is not None:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(server.base + health_path(server.kind), timeout=2) as r,
            ):
                if r.status == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"{server.kind} was not ready after {limit_s:.0f} s: {tail(server)}")


def tail(server: Server, lines: int = 8) -> str:
    return " | ".join(list(server.log)[-lines:]) or "(no output)"


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop(server: Server) -> int | None:
    """SIGTERM, then SIGKILL after a grace period; leftovers of its process group are killed too."""
    proc = server.proc
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    _signal_group(proc, signal.SIGKILL)
    return proc.returncode


@contextlib.contextmanager
def running(kind: str, model: str, env: dict[str, str]):
    server = start(kind, model, env)
    try:
        wait_ready(server)
        yield server
    finally:
        code = stop(server)
        if is_samebits(kind) and code != 0:
            print(f"  note: samebits serve exited with {code} on SIGTERM (expected 0): {tail(server)}")


# -- the client -----------------------------------------------------------------------------
@dataclasses.dataclass
class Cell:
    server: str
    concurrency: int
    requested: int
    seconds: float
    latencies: list[float]  # of the 200 answers
    answers: dict[int, bytes]  # row index -> body of a 200 answer
    statuses: collections.Counter
    aborted: bool
    round: int = 0  # --rounds: which round of the servers this cell was measured in
    differ: int | None = None  # vs the row run alone (batch of 1)
    differ_p1: int | None = None  # vs Predictor.predict_one (samebits only)
    malformed: int = 0
    wrk: wrk_load.WrkCell | None = None  # the wrk client's figures (differ: vs the quiet answers)
    cpu_s: float | None = None  # the server's CPU seconds (its process tree) during the cell

    @property
    def finished(self) -> int:
        return self.wrk.answered if self.wrk else sum(self.statuses.values())

    @property
    def answered_ok(self) -> int:
        return self.wrk.ok if self.wrk else self.statuses.get(200, 0)

    def latency_ms(self, q: float) -> float | None:
        if self.wrk:
            return {50: self.wrk.p50_ms, 99: self.wrk.p99_ms}[q]
        return float(np.percentile(self.latencies, q)) * 1000 if self.latencies else None

    @property
    def cpu_ms_per_request(self) -> float | None:
        return self.cpu_s * 1000 / self.answered_ok if self.cpu_s is not None and self.answered_ok else None

    @property
    def client_cpu_ms_per_request(self) -> float | None:
        """wrk's CPU per answer: what the client took from the cores the server and offline share."""
        return (
            self.wrk.cpu_s * 1000 / self.answered_ok
            if self.wrk and self.wrk.cpu_s is not None and self.answered_ok
            else None
        )


async def _worker(client: Any, url: str, bodies: list[bytes], order: Any, deadline: float, cell: Cell) -> None:
    import httpx

    for i in order:  # one iterator shared by every worker
        if time.monotonic() > deadline:
            return
        started = time.perf_counter()
        try:
            response = await client.post(url, content=bodies[i], headers=HEADERS)
        except httpx.HTTPError as exc:
            cell.statuses[type(exc).__name__] += 1
            continue
        cell.statuses[response.status_code] += 1
        if response.status_code == 200:
            cell.latencies.append(time.perf_counter() - started)
            cell.answers[i] = response.content


async def open_connections(client: Any, url: str, bodies: list[bytes], concurrency: int, rounds: int = 2) -> None:
    """Untimed requests, ``concurrency`` at once, so the timed ones find every connection open."""
    for _ in range(rounds):
        calls = [client.post(url, content=bodies[i % len(bodies)], headers=HEADERS) for i in range(concurrency)]
        await asyncio.gather(*calls, return_exceptions=True)


@contextlib.contextmanager
def quiet_collector() -> Any:
    """No garbage collection in the client while a cell runs (what was loaded before frozen):
    the client's own pauses would count as every server's latency."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


async def load(url: str, bodies: list[bytes], concurrency: int, kind: str, limit_s: float = CELL_LIMIT_S) -> Cell:
    """Send every body once, ``concurrency`` at a time, for at most ``limit_s``."""
    import httpx

    cell = Cell(kind, concurrency, len(bodies), 0.0, [], {}, collections.Counter(), False)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with quiet_collector():
        return await _timed_cell(url, bodies, concurrency, limits, cell, limit_s)


async def _timed_cell(url: str, bodies: list[bytes], concurrency: int, limits: Any, cell: Cell, limit_s: float) -> Cell:
    import httpx

    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(limit_s)) as client:
        await open_connections(client, url, bodies, concurrency)
        order = iter(range(len(bodies)))
        started = time.perf_counter()
        deadline = time.monotonic() + limit_s
        tasks = [asyncio.create_task(_worker(client, url, bodies, order, deadline, cell)) for _ in range(concurrency)]
        done, pending = await asyncio.wait(tasks, timeout=limit_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        cell.seconds = time.perf_counter() - started
    for task in done:
        if task.exception() is not None:
            cell.statuses[f"client {type(task.exception()).__name__}"] += 1
    cell.aborted = bool(pending) or cell.finished < len(bodies)
    return cell


# -- references and comparison --------------------------------------------------------------
def make_rows(example: torch.Tensor, n: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(ROWS_SEED)
    return torch.randn(n, *example.shape[1:], generator=gen)


def alone_references(model: torch.nn.Module, rows: torch.Tensor) -> list[torch.Tensor]:
    """Each row run alone: a batch of 1, eval, inference_mode."""
    model.eval()
    with torch.inference_mode():
        return [model(rows[i : i + 1])[0].clone() for i in range(len(rows))]


def predict_one_references(
    model: torch.nn.Module, example: torch.Tensor, rows: torch.Tensor, cache_dir: str
) -> tuple[list[torch.Tensor], str]:
    """Each row through ``Predictor.predict_one`` (samebits' guarantee), and its verified sizes."""
    import samebits

    with samebits.Predictor(model, example_inputs=example, max_batch_size=MAX_BATCH, cache_dir=cache_dir) as p:
        refs = [p.predict_one(rows[i]) for i in range(len(rows))]
        return refs, ",".join(map(str, p.invariance.sizes))


def answer_row(body: bytes) -> torch.Tensor | None:
    """The one output row of a v2 JSON answer (None when it is not one)."""
    try:
        out = json.loads(body)["outputs"][0]
        tensor = torch.tensor(out["data"], dtype=torch.float32).reshape(out["shape"])
    except (ValueError, KeyError, IndexError, TypeError, RuntimeError):
        return None
    return tensor[0] if tensor.dim() >= 1 and tensor.shape[0] == 1 else None


def count_differ(cell: Cell, refs: list[torch.Tensor], p1_refs: list[torch.Tensor] | None) -> None:
    cell.differ, cell.differ_p1 = 0, (0 if p1_refs is not None else None)
    for i, body in cell.answers.items():
        row = answer_row(body)
        if row is None:
            cell.malformed += 1
            continue
        cell.differ += not torch.equal(row, refs[i])
        if p1_refs is not None:
            cell.differ_p1 += not torch.equal(row, p1_refs[i])


# -- the run ------------------------------------------------------------------------------------
@dataclasses.dataclass
class ModelRun:
    name: str
    bodies: list[bytes]
    refs: list[torch.Tensor]
    p1_refs: list[torch.Tensor]
    p1_sizes: str
    describe: str
    rows: torch.Tensor
    cells: list[Cell] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    offline: list[float] = dataclasses.field(default_factory=list)  # the Predictor's rows/s, one per round

    @property
    def n(self) -> int:
        return len(self.bodies)


def prepare_model(name: str, n: int, cache_dir: str) -> ModelRun:
    model, example = load_factory(name)
    rows = make_rows(example, n)
    refs = alone_references(model, rows)  # before the Predictor's determinism profile is entered
    p1_refs, sizes = predict_one_references(model, example, rows, cache_dir)
    describe = f"input {list(example.shape[1:])} -> output {list(refs[0].shape)}"
    return ModelRun(name, [request_body(r) for r in rows], refs, p1_refs, sizes, describe, rows)


def offline_rows_per_s(name: str, cache_dir: str, seconds: float = 2.0) -> float:
    """The same model through a Predictor in this process, batches of ``MAX_BATCH`` rows: the
    rate the served rows/s is held against (the model alone, no HTTP)."""
    import samebits

    model, example = load_factory(name)
    batch = make_rows(example, MAX_BATCH)
    with samebits.Predictor(model, example_inputs=example, max_batch_size=MAX_BATCH, cache_dir=cache_dir) as p:
        for _ in range(3):
            p.predict(batch)
        rates = []
        for _ in range(3):
            count, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds / 3:
                p.predict(batch)
                count += 1
            rates.append(count * MAX_BATCH / (time.perf_counter() - started))
    return float(np.median(rates))


def infer_url(server: Server, model: str) -> str:
    return f"{server.base}/v2/models/{model}/infer"


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as r:
        return r.read(), dict(r.headers)


def decode_answer(body: bytes, headers: dict[str, str]) -> torch.Tensor | None:
    """The one output row of an answer, JSON or binary (None when it is not one)."""
    length = {k.lower(): v for k, v in headers.items()}.get("inference-header-content-length")
    if length is None:
        return answer_row(body)
    out = json.loads(body[: int(length)])["outputs"][0]
    values = torch.frombuffer(bytearray(body[int(length) :]), dtype=torch.float32).reshape(out["shape"])
    return values[0] if values.shape[0] == 1 else None


def run_server_grpc(run: ModelRun, kind: str, concurrencies: list[int], env: dict[str, str], round_: int) -> None:
    """Cells driven by h2load over gRPC (one row for every call); the answer's bits checked with a
    gRPC client before and after the load (equal to predict_one)."""
    row = run.rows[0].numpy()
    body = h2load_grpc.infer_request(run.name, row)
    with running(kind, run.name, env) as server:
        assert server.grpc_port is not None, tail(server)
        h2load_grpc.run(server.grpc_port, body, min(MAX_BATCH, 16), 200, CELL_LIMIT_S, CLIENT_CPUS)
        for c in concurrencies:
            cell = Cell(kind, c, run.n, 0.0, [], {}, collections.Counter(), False, round_)
            before = proc_cpu.tree_cpu_seconds(server.proc.pid)
            h2 = h2load_grpc.run(server.grpc_port, body, c, run.n, CELL_LIMIT_S, CLIENT_CPUS)
            cell.cpu_s = proc_cpu.tree_cpu_seconds(server.proc.pid) - before
            after = h2load_grpc.answer_row(run.name, server.grpc_port, row)
            cell.wrk = wrk_load.WrkCell(
                h2.answered, h2.ok, 0, h2.answered - h2.ok, h2.seconds, h2.p50_ms, h2.p99_ms, 0, 0, h2.cpu_s
            )
            cell.seconds, cell.aborted = h2.seconds, h2.answered < run.n
            cell.differ = None  # h2load does not read gRPC answers
            cell.differ_p1 = int(not np.array_equal(after, run.p1_refs[0].numpy()))  # after the load
            run.cells.append(cell)
            print(f"  {kind:<16} c={c:<3} {summary(cell)}", flush=True)


def run_server_wrk(run: ModelRun, kind: str, concurrencies: list[int], env: dict[str, str], round_: int) -> None:
    """Cells driven by wrk: the quiet answers first (one request at a time, checked against the
    references in this process), then every concurrency, each answer checked against them in wrk."""
    rows = run.rows[:WRK_BODIES]
    bodies, headers = wrk_bodies(kind, rows)
    with running(kind, run.name, env) as server:
        if server.note and round_ == 0:
            run.notes.append(f"{kind} serve verified batch sizes {server.note}")
        url = infer_url(server, run.name)
        wrk_load.run(url, bodies, headers, [b""] * len(bodies), min(MAX_BATCH, 16), 200, CELL_LIMIT_S, CLIENT_CPUS)
        quiet = [post(url, b, h) for b, h in zip(bodies, headers)]
        answers = [decode_answer(b, h) for b, h in quiet]
        refs = run.p1_refs if is_samebits(kind) else run.refs
        quiet_differ = sum(a is None or not torch.equal(a, refs[i]) for i, a in enumerate(answers))
        for c in concurrencies:
            cell = Cell(kind, c, run.n, 0.0, [], {}, collections.Counter(), False, round_)
            before = proc_cpu.tree_cpu_seconds(server.proc.pid)
            cell.wrk = wrk_load.run(url, bodies, headers, [b for b, _ in quiet], c, run.n, CELL_LIMIT_S, CLIENT_CPUS)
            cell.cpu_s = proc_cpu.tree_cpu_seconds(server.proc.pid) - before
            cell.seconds = cell.wrk.seconds
            cell.aborted = cell.wrk.answered < run.n
            cell.differ = cell.wrk.differ  # under load vs the quiet answers
            cell.differ_p1 = quiet_differ if is_samebits(kind) else None  # the quiet answers vs predict_one
            if not is_samebits(kind):
                cell.differ += quiet_differ
            run.cells.append(cell)
            print(f"  {kind:<16} c={c:<3} {summary(cell)}", flush=True)


def run_server(run: ModelRun, kind: str, concurrencies: list[int], env: dict[str, str], round_: int = 0) -> None:
    if kind == "samebits-grpc":
        run_server_grpc(run, kind, concurrencies, env, round_)
        return
    if CLIENT == "wrk":
        run_server_wrk(run, kind, concurrencies, env, round_)
        return
    if kind == "samebits-binary":
        raise RuntimeError("samebits-binary needs the wrk client")
    with running(kind, run.name, env) as server:
        if server.note and round_ == 0:
            run.notes.append(f"{kind} serve verified batch sizes {server.note}")
        url = infer_url(server, run.name)
        asyncio.run(load(url, run.bodies[:WARMUP_REQUESTS], min(MAX_BATCH, max(concurrencies)), kind))
        for c in concurrencies:
            cell = asyncio.run(load(url, run.bodies, c, kind))
            cell.round = round_
            count_differ(cell, run.refs, run.p1_refs if is_samebits(kind) else None)
            run.cells.append(cell)
            print(f"  {kind:<16} c={c:<3} {summary(cell)}", flush=True)


def summary(cell: Cell) -> str:
    text = f"{cell.finished}/{cell.requested} answered in {cell.seconds:.1f} s, {rate(cell):.0f} req/s"
    if cell.aborted:
        text += f" (aborted at {CELL_LIMIT_S:.0f} s)" if cell.seconds >= CELL_LIMIT_S - 0.5 else " (incomplete)"
    if cell.cpu_ms_per_request is not None:
        text += f", server CPU {cell.cpu_ms_per_request:.2f} ms/request"
    if cell.client_cpu_ms_per_request is not None:
        text += f", client CPU {cell.client_cpu_ms_per_request:.2f} ms/request"
    bad = {k: v for k, v in cell.statuses.items() if k != 200}
    if cell.wrk:
        bad = {k: v for k, v in (("status", cell.wrk.status_bad), ("socket", cell.wrk.socket_errors)) if v}
    return text + (f"; not 200: {dict(bad)}" if bad else "")


def run_model(name: str, servers: list[str], concurrencies: list[int], n: int, tmp: Path, rounds: int = 1) -> ModelRun:
    print(f"\n{name}: references for {n} rows ...", flush=True)
    run = prepare_model(name, n, str(tmp / "bench-cache"))
    env = {**os.environ, "SAMEBITS_CACHE_DIR": str(tmp / f"serve-cache-{name}")}  # the server calibrates itself
    if MODEL_THREADS:  # torch reads it at import, in every server alike
        env["OMP_NUM_THREADS"] = str(MODEL_THREADS)
    env.update(SERVER_ENV)
    for r in range(rounds):  # each round starts with the next server: drift in the machine hits all alike
        if rounds > 1:
            print(f" round {r + 1} of {rounds}", flush=True)
        run.offline.append(offline_rows_per_s(name, str(tmp / "bench-cache")))
        print(f"  offline Predictor (batch {MAX_BATCH}): {run.offline[-1]:.0f} rows/s", flush=True)
        for kind in servers[r % len(servers) :] + servers[: r % len(servers)]:
            try:
                run_server(run, kind, concurrencies, env, r)
            except Exception as exc:  # one server failing leaves the others' rows
                run.notes.append(f"{kind} failed in round {r + 1}: {type(exc).__name__}: {exc}")
                print(f"  {kind} failed: {exc}", flush=True)
    return run


# -- reporting ----------------------------------------------------------------------------------
def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def served_ratio(run: ModelRun, cell: Cell) -> float | None:
    """Served rows/s (one row per request) over the offline Predictor's rows/s in that round."""
    return rate(cell) / run.offline[cell.round] if cell.round < len(run.offline) and run.offline[cell.round] else None


def print_table(run: ModelRun) -> None:
    print(f"\n=== {run.name} ({run.describe}); {run.n} requests per cell, one row each ===")
    print(f"predict_one reference: Predictor verified batch sizes {run.p1_sizes}")
    print(f"offline Predictor at batch {MAX_BATCH}: {spread(run.offline, '.0f')} rows/s" if run.offline else "")
    differ = "differ" if CLIENT == "python" else "differ (vs quiet)"
    p1 = "differ vs predict_one" if CLIENT == "python" else "quiet vs predict_one"
    print(
        f"{'server':<16} {'round':>5} {'conc':>4} {'done':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}"
        f" {differ:>17} {p1:>21} {'CPU ms/req':>10} {'client CPU':>10} {'÷ offline':>9}"
    )
    for cell in sorted(run.cells, key=lambda c: (c.server, c.concurrency, c.round)):
        errors = cell.finished - cell.answered_ok + cell.malformed
        print(
            f"{cell.server:<16} {cell.round + 1:>5} {cell.concurrency:>4} {cell.finished:>6} {rate(cell):>8.1f} "
            f"{fmt(cell.latency_ms(50), '.2f'):>8} {fmt(cell.latency_ms(99), '.2f'):>8} {errors:>6} "
            f"{fmt(cell.differ, 'd'):>17} {fmt(cell.differ_p1, 'd'):>21} {fmt(cell.cpu_ms_per_request, '.2f'):>10} "
            f"{fmt(cell.client_cpu_ms_per_request, '.2f'):>10} {fmt(served_ratio(run, cell), '.2f'):>9}"
        )
    for note in run.notes:
        print(f"note: {note}")


def find(run: ModelRun, server: str, concurrency: int, round_: int = 0) -> Cell | None:
    return next(
        (c for c in run.cells if c.server == server and c.concurrency == concurrency and c.round == round_), None
    )


def per_round(run: ModelRun, ours: str, theirs: list[str], c: int, value: Any, best: Any = max) -> list[float]:
    """``value(our cell, their best)`` in every round where both were measured; their best is
    ``best`` over ``theirs`` of ``value``'s second argument as a cell."""
    out = []
    for r in sorted({x.round for x in run.cells}):
        mine = find(run, ours, c, r)
        peers = [x for x in (find(run, t, c, r) for t in theirs) if x is not None and x.answered_ok]
        if mine is not None and mine.answered_ok and peers:
            out.append(best(value(mine, peer) for peer in peers))
    return out


def rate(cell: Cell) -> float:
    return cell.answered_ok / cell.seconds if cell.seconds else 0.0


def spread(values: list[float], fmt: str) -> str:
    """The median and, over several rounds, every round's value."""
    text = format(float(np.median(values)), fmt)
    return text + (f" (rounds: {', '.join(format(v, fmt) for v in values)})" if len(values) > 1 else "")


def target(ok: bool, text: str) -> str:
    return f"{'met   ' if ok else 'MISSED'} {text}"


PEERS = ["litserve", "fastapi"]


def print_targets(runs: list[ModelRun]) -> None:
    """The issue's targets, each from the median over rounds (every round's value shown)."""
    lines = []
    for run in runs:
        for cell in (c for c in run.cells if is_samebits(c.server)):
            ok = cell.differ in (0, None) and cell.differ_p1 == 0 and cell.finished >= cell.requested
            under_load = (
                "not read under load by h2load" if cell.differ is None else f"{cell.differ} of {cell.finished} differ"
            )
            lines.append(
                target(
                    ok,
                    f"{run.name} {cell.server} c={cell.concurrency} round {cell.round + 1}: {under_load} "
                    f"({cell.differ_p1} quiet answers from predict_one); {cell.finished} of {cell.requested} answered",
                )
            )
        if run.name != "medium_mlp":
            continue
        for ours in sorted({c.server for c in run.cells if is_samebits(c.server)}):
            floor = 0.3 if ours == "samebits" else 0.5  # JSON; binary or gRPC
            for c in (16, 64):
                ratios = [
                    r
                    for r in (served_ratio(run, x) for x in run.cells if x.server == ours and x.concurrency == c)
                    if r is not None
                ]
                if ratios and c == 64:
                    lines.append(
                        target(
                            np.median(ratios) >= floor,
                            f"{run.name} {ours} c={c}: served rows/s {spread(ratios, '.2f')}x offline (>= {floor})",
                        )
                    )
                elif ratios:
                    lines.append(f"       {run.name} {ours} c={c}: served rows/s {spread(ratios, '.2f')}x offline")
                speed = per_round(run, ours, PEERS, c, lambda a, b: rate(a) / rate(b), best=min)
                if speed:
                    lines.append(
                        target(
                            np.median(speed) >= 2,
                            f"{run.name} {ours} c={c}: req/s {spread(speed, '.2f')}x the better peer's (>= 2)",
                        )
                    )
                tails = per_round(run, ours, PEERS, c, lambda a, b: a.latency_ms(99) / b.latency_ms(99), best=max)
                if tails:
                    lines.append(
                        target(
                            np.median(tails) <= 0.5,
                            f"{run.name} {ours} c={c}: p99 {spread(tails, '.2f')}x the better peer's (<= 0.5)",
                        )
                    )
                cpu = per_round(
                    run,
                    ours,
                    ["fastapi"],
                    c,
                    lambda a, b: (
                        a.cpu_ms_per_request / b.cpu_ms_per_request if a.cpu_s is not None and b.cpu_s else float("nan")
                    ),
                )
                if cpu and not any(np.isnan(cpu)):
                    lines.append(
                        target(
                            np.median(cpu) <= 0.33,
                            f"{run.name} {ours} c={c}: server CPU per request {spread(cpu, '.2f')}x FastAPI's (<= 0.33)",
                        )
                    )
            gaps = per_round(run, ours, ["fastapi"], 1, lambda a, b: a.latency_ms(50) - b.latency_ms(50))
            if gaps:
                lines.append(
                    target(
                        np.median(gaps) <= 1.0,
                        f"{run.name} {ours} c=1: p50 {spread(gaps, '+.2f')} ms vs plain FastAPI (<= +1)",
                    )
                )
    print("\ntargets (median over rounds):")
    print("\n".join(f"  {line}" for line in lines) or "  (nothing to compare)")


def print_header(n: int, servers: list[str], concurrencies: list[int]) -> None:
    lit = getattr(ls, "__version__", "?") if ls is not None else "not installed"
    print(f"serve_load {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), cpu count {os.cpu_count()}, "
        f"python {platform.python_version()}, litserve {lit}"
    )
    print(f"servers {','.join(servers)}; concurrency {','.join(map(str, concurrencies))}; {n} requests per cell")
    client = (
        f"wrk ({subprocess.run(['wrk', '-v'], capture_output=True, text=True).stdout.split(chr(10))[0]}), one thread, {WRK_BODIES} rotating bodies"
        if CLIENT == "wrk"
        else "python (asyncio + httpx)"
    )
    print(f"client: {client}; max batch size {MAX_BATCH}")
    print(f"model threads in every server: {MODEL_THREADS or 'torch default'}")
    if SERVER_CPUS:
        print(f"pinned: client on core {sorted(CLIENT_CPUS or [])}, servers on cores {sorted(SERVER_CPUS)}")
    print(f"load average {load_average()} (anything else running on these cores skews every number)")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


# -- command line ---------------------------------------------------------------------------
def names(text: str, known: tuple[str, ...]) -> list[str]:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="300 requests, concurrency 1 and 16, the two MLPs")
    p.add_argument("--n", type=int, help="requests per cell [2000; --quick: 300]")
    p.add_argument("--models", type=lambda s: names(s, MODELS), help=f"comma-separated, of {','.join(MODELS)}")
    p.add_argument("--servers", type=lambda s: names(s, SERVERS), help=f"comma-separated, of {','.join(SERVERS)}")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], help="[1,16,64; --quick: 1,16]")
    p.add_argument(
        "--model-threads",
        type=int,
        help="every server's model at N intra-op threads (samebits --threads N, OMP_NUM_THREADS for all) [torch's default]",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="the client on the first core, every server (and its workers) on the others (Linux)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every server R times, each round starting with the next server; targets from the median [1]",
    )
    p.add_argument(
        "--client",
        choices=("wrk", "python"),
        help="wrk: compiled, one thread, 32 rotating bodies, every answer checked against its quiet answer; "
        "python: asyncio + httpx, N distinct rows checked against each row alone [wrk where installed]",
    )
    p.add_argument(
        "--max-batch", type=int, default=MAX_BATCH, help=f"the servers' and offline batch size [{MAX_BATCH}]"
    )
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable for every server's environment only (not the offline Predictor's), e.g. OMP_WAIT_POLICY=PASSIVE",
    )
    p.add_argument("--serve", choices=("fastapi", "litserve"), help=argparse.SUPPRESS)  # a server, for the bench
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.n = args.n or (300 if args.quick else 2000)
    args.models = args.models or (["small_mlp", "medium_mlp"] if args.quick else list(MODELS))
    args.servers = args.servers or [s for s in SERVERS if s != "samebits-isolate"]
    if args.rounds < 1:
        p.error("--rounds takes a positive count")
    args.concurrency = args.concurrency or ([1, 16] if args.quick else list(CONCURRENCY))
    args.client = args.client or ("wrk" if wrk_load.available() else "python")
    bad = [e for e in args.server_env if "=" not in e]
    if bad:
        p.error(f"--server-env takes KEY=VALUE, not {bad[0]!r}")
    if args.client == "python":
        args.servers = [s for s in args.servers if s != "samebits-binary"]
    if h2load_grpc.available() is None and "samebits-grpc" in args.servers:
        print("note: h2load is not installed (apt-get install nghttp2-client); the gRPC rows are skipped")
        args.servers.remove("samebits-grpc")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    global MODEL_THREADS, SERVER_CPUS, CLIENT_CPUS, CLIENT, MAX_BATCH
    MODEL_THREADS, CLIENT, MAX_BATCH = args.model_threads, args.client, args.max_batch
    SERVER_ENV.update(e.split("=", 1) for e in args.server_env)
    if args.serve:
        (serve_fastapi if args.serve == "fastapi" else serve_litserve)(args.model, args.port)
        return
    if args.pin:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            raise SystemExit("--pin needs at least 2 cores")
        CLIENT_CPUS, SERVER_CPUS = {cores[0]}, set(cores[1:])
        if CLIENT == "python":
            os.sched_setaffinity(0, CLIENT_CPUS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed bench still stops its servers
    servers = list(args.servers)
    if "litserve" in servers and ls is None:
        print("note: litserve is not importable; its rows are skipped")
        servers.remove("litserve")
    print_header(args.n, servers, args.concurrency)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="samebits-serve-load-"))
    runs = []
    try:
        for model in args.models:
            runs.append(run_model(model, servers, args.concurrency, args.n, tmp, args.rounds))
            print_table(runs[-1])
            print(f"load average {load_average()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_targets(runs)
    print(f"\ntotal {time.monotonic() - started:.0f} s; load average {load_average()}")


if __name__ == "__main__":
    main()
