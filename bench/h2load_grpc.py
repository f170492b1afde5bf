"""One gRPC load cell driven by ``h2load`` (nghttp2's compiled HTTP/2 load generator, Debian's
``nghttp2-client``): the Open Inference Protocol's ``ModelInfer`` with the row in
``raw_input_contents``, one body for every request (h2load sends one), latencies from its
per-request log. h2load sees HTTP/2 statuses, not gRPC's: the bench checks the answers' bits
with a gRPC client before and after the load (tests/test_serve_grpc.py checks them under load)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

PATH = "/inference.GRPCInferenceService/ModelInfer"


@dataclasses.dataclass
class H2Cell:
    """What h2load measured in one cell."""

    answered: int
    ok: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_s: float  # h2load's own CPU seconds (user + system)


def available() -> str | None:
    return shutil.which("h2load")


def infer_request(model: str, row: np.ndarray) -> bytes:
    """A ModelInferRequest for one FP32 row (input ``x``), serialized and framed as gRPC sends it."""
    from samebits.serve.grpc_service import MESSAGE_CLASSES

    request = MESSAGE_CLASSES["ModelInferRequest"](model_name=model)
    tensor = request.inputs.add()
    tensor.name, tensor.datatype = "x", "FP32"
    tensor.shape.extend([1, *row.shape])
    request.raw_input_contents.append(np.ascontiguousarray(row, dtype=np.float32).tobytes())
    payload = request.SerializeToString()
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def answer_row(model: str, port: int, row: np.ndarray) -> np.ndarray:
    """The gRPC answer to one row, by a real gRPC client (the first output, its one row)."""
    import grpc

    from samebits.serve.grpc_service import MESSAGE_CLASSES

    body = infer_request(model, row)[5:]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            PATH,
            request_serializer=lambda b: b,
            response_deserializer=MESSAGE_CLASSES["ModelInferResponse"].FromString,
        )
        reply = call(body, timeout=30)
    return np.frombuffer(reply.raw_output_contents[0], dtype=np.float32)


def run(port: int, body: bytes, concurrency: int, limit: int, limit_s: float, cpus: set[int] | None = None) -> H2Cell:
    """``limit`` calls at ``concurrency`` streams on as many connections, one h2load thread."""
    exe = available()
    if exe is None:
        raise RuntimeError("h2load is not installed (Debian: apt-get install nghttp2-client)")
    with tempfile.TemporaryDirectory(prefix="samebits-h2load-") as tmp:
        data, log = Path(tmp) / "body", Path(tmp) / "log"
        data.write_bytes(body)
        cmd = [exe, "-n", str(limit), "-c", str(concurrency), "-m", "1", "-t", "1", "-d", str(data)]
        cmd += ["-H", "content-type: application/grpc", "-H", "te: trailers", f"--log-file={log}"]
        cmd += ["-T", str(round(limit_s)), f"http://127.0.0.1:{port}{PATH}"]
        import os
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=limit_s + 30,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines = [x.split("\t") for x in log.read_text().splitlines()] if log.exists() else []
    finished = re.search(r"finished in ([\d.]+)(m?s)", out.stdout)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out.stdout)
    if finished is None or done is None:
        raise RuntimeError(f"h2load gave no result (exit {out.returncode}): {(out.stdout + out.stderr)[-400:]}")
    seconds = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    latencies = np.array([int(x[2]) for x in lines if len(x) >= 3 and x[1] == "200"], dtype=float) / 1000
    p50, p99 = np.percentile(latencies, [50, 99]) if len(latencies) else (float("nan"),) * 2
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return H2Cell(int(done.group(1)), int(done.group(2)), seconds, float(p50), float(p99), cpu_s)
