"""``samebits serve --isolate``: the model runs in a child process (``python -m
samebits.serve.worker``), so that a forward that hangs can be ended: the child is killed and a new
one started from the same calibration (the artifact cache), and the server is not ready until it
is back. Tensors cross the pipe as safetensors bytes, never pickles.

Frames on the child's stdin/stdout: a 4-byte big-endian length, then the bytes. The parent sends
the job (JSON) once, then one safetensors frame per batch (``args.N``/``kwargs.NAME``); the child
answers one JSON frame (``{"ready": ...}`` once, then ``{"ok": true}`` followed by a safetensors
frame of the named outputs, or ``{"error": ...}``)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

import torch

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Plan
from samebits.serve.signature import Signature, TensorSpec

ENTRY = "samebits.serve.worker"


class WorkerDied(RuntimeError):
    """The child process ended (killed after a hang, or crashed) before it answered."""


def send(stream: IO[bytes], data: bytes) -> None:
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes]) -> bytes:
    head = stream.read(4)
    if len(head) < 4:
        raise WorkerDied("the model's worker process ended")
    (size,) = struct.unpack(">I", head)
    data = stream.read(size)
    if len(data) < size:
        raise WorkerDied("the model's worker process ended mid-answer")
    return data


def pack_inputs(inputs: ModelInputs) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in inputs.named().items()})


def unpack_inputs(data: bytes) -> ModelInputs:
    from safetensors.torch import load

    return ModelInputs.from_named(load(data))


def describe_signature(signature: Signature) -> dict[str, Any]:
    spec = lambda s: {"name": s.name, "dtype": str(s.dtype).removeprefix("torch."), "row_shape": list(s.row_shape)}  # noqa: E731
    return {
        "inputs": [spec(s) for s in signature.inputs],
        "positional": signature.positional,
        "outputs": [spec(s) for s in signature.outputs],
    }


def signature_from(data: dict[str, Any]) -> Signature:
    """The parent's signature: outputs come back as a dict keyed by their names."""
    from samebits.tensors.tree import flatten

    spec = lambda d: TensorSpec(d["name"], getattr(torch, d["dtype"]), tuple(d["row_shape"]))  # noqa: E731
    outputs = [spec(d) for d in data["outputs"]]
    paths = {s.name: next(iter(flatten({s.name: 0}))) for s in outputs}  # where each name sits in the dict
    return Signature([spec(d) for d in data["inputs"]], data["positional"], outputs, paths)


class IsolatedPredictor:
    """A :class:`~samebits.runtime.plan.Restartable` runner: the model in a child process that
    :meth:`restart` replaces; its plan and fingerprint are the child's Predictor's."""

    def __init__(self, model_spec: str, options: Any, cache_dir: str | None = None) -> None:
        if not isinstance(model_spec, str):
            raise UserError("--isolate needs a MODEL spec that a fresh process can load, not a model object")
        import dataclasses

        self.job = {"spec": model_spec, "options": dataclasses.asdict(options), "cache_dir": cache_dir}
        self._lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self.restarts = 0
        self.ready = self._start()
        self.signature = signature_from(self.ready["signature"])
        self.plan = Plan.from_dict(self.ready["plan"])
        self.fingerprint: dict[str, Any] = self.ready["fingerprint"]
        self.not_ready: str | None = self.ready.get("not_ready")

    def _start(self) -> dict[str, Any]:
        from samebits.measure.processes import die_with_parent

        if self._stderr is not None:
            self._stderr.close()  # the previous worker's
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", ENTRY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        send(self.proc.stdin, json.dumps(self.job).encode())
        try:
            answer = json.loads(receive(self.proc.stdout))
        except WorkerDied:
            self.kill()
            raise UserError(f"the model's worker process could not start: {self._tail()}") from None
        if "error" in answer:
            self.kill()
            raise UserError(answer["error"])
        return answer["ready"]  # type: ignore[no-any-return]

    def _tail(self) -> str:
        if self._stderr is None:
            return "no output"
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def predict(self, inputs: ModelInputs) -> dict[str, torch.Tensor]:
        """The named outputs of one batch, computed in the child."""
        from safetensors.torch import load

        with self._lock:
            proc = self.proc
            if proc is None or proc.poll() is not None:
                raise WorkerDied("the model's worker process is not running")
            assert proc.stdin is not None and proc.stdout is not None
            try:
                send(proc.stdin, pack_inputs(inputs))
            except (BrokenPipeError, OSError):
                raise WorkerDied("the model's worker process ended") from None
            answer = json.loads(receive(proc.stdout))
            if "error" in answer:
                raise RuntimeError(answer["error"])
            return load(receive(proc.stdout))

    def kill(self) -> None:
        """End the child now (a forward that hangs); a waiting :meth:`predict` gets WorkerDied."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """A new child, from the same calibration; its plan must be the first one's."""
        self.kill()
        with self._lock:
            ready = self._start()
            if Plan.from_dict(ready["plan"]).sizes != self.plan.sizes or ready["fingerprint"] != self.fingerprint:
                self.kill()
                raise UserError("the restarted worker verified other batch sizes or has another fingerprint")
            self.restarts += 1

    def close(self) -> None:
        proc = self.proc
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._stderr is not None:
            self._stderr.close()

    def __enter__(self) -> IsolatedPredictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
