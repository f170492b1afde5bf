"""Fresh interpreters (``python -m samebits.child TASK``) that load the same model and inputs and
answer a :class:`~samebits.measure.job.Job` each: many at once, each with its own timeout."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import select
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from samebits import deadline
from samebits.models.inputs import Model, ModelInputs
from samebits.measure.job import ENTRY, Job, Reply
from samebits.measure.spawn import Child, ChildDied, ProtocolError, read_reply
from samebits.measure.ops import OpCall, op_calls
from samebits.measure.trace import Trace


@dataclasses.dataclass
class ChildJob:
    """One child: its environment overrides (an empty value: the variable removed) and what it
    should run."""

    label: str
    env: dict[str, str]
    threads: int | None = None
    keep: list[str] | None = None
    ops: tuple[str, int] | None = None  # (module, call): also record op digests inside it
    hooks: bool = False  # per-module digests too (only to localise a divergence)
    task: str = "trace"  # a task of samebits.child.TASKS
    params: dict[str, Any] | None = None
    # a model built from its spec gets the parent's weights after it is built (the machine axis:
    # its forwards compared, not what a capped CPU's initialisers draw); which weights it built
    # comes back either way
    parents_weights: bool = False


@dataclasses.dataclass
class ChildResult:
    label: str
    trace: Trace | None
    error: str | None
    seconds: float
    kept: dict[str, dict[str, torch.Tensor]] = dataclasses.field(default_factory=dict)
    threads: int | None = None
    ops: list[OpCall] | None = None
    data: dict[str, Any] | None = None  # what a non-trace task returned
    weights: dict[str, str] | None = None  # digests of the weights the child's factory built (a spec)


def unshippable_reason(model: Model) -> str | None:
    """Why an in-memory model cannot be sent to a child process, or ``None`` if it can be tried."""
    if not isinstance(model, nn.Module):
        return f"a {type(model).__name__} cannot be sent to a child process"
    for module in model.modules():
        cls = type(module)
        if cls.__module__ == "__main__":
            return f"class {cls.__name__} is defined in __main__, which a child process cannot import"
        if "<locals>" in cls.__qualname__:
            return f"class {cls.__qualname__} is defined inside a function, which a child process cannot import"
    return None


class _Pipe:
    """The child's stdout read straight from its descriptor, giving up once ``stop`` is set: a
    process the child forked may hold the pipe open after the child died, and a read blocked on
    it would never end (nor would closing the stream under it)."""

    def __init__(self, fd: int, stop: threading.Event) -> None:
        self.fd, self.stop = fd, stop

    def read(self, size: int) -> bytes:
        parts: list[bytes] = []
        while size > 0 and not self.stop.is_set():
            if not select.select([self.fd], [], [], 0.1)[0]:
                continue
            data = os.read(self.fd, min(size, 1 << 20))
            if not data:
                break
            parts.append(data)
            size -= len(data)
        return b"".join(parts)


class Running:
    """One started child and the thread that reads its reply (a reply larger than a pipe holds
    must be read while the child runs, or the child never ends)."""

    def __init__(self, index: int, job: ChildJob, child: Child) -> None:
        self.index, self.job, self.child, self.started = index, job, child, time.monotonic()
        self.reply: Reply | None = None
        self.failed: str | None = None
        self._stop = threading.Event()
        self.reader = threading.Thread(target=self._read, name=f"samebits-child-{index}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            self.reply = read_reply(_Pipe(self.child.stdout.fileno(), self._stop))
        except (EOFError, OSError):
            pass  # collected as how the child ended
        except ProtocolError as exc:
            self.failed = str(exc)

    @property
    def answered(self) -> bool:
        return not self.reader.is_alive()

    def done(self, timeout: float) -> bool:
        """Whether it answered, ended (what it wrote is read first), or ran ``timeout`` seconds."""
        if self.answered or time.monotonic() - self.started >= timeout:
            return True
        if self.child.running:
            return False
        self.reader.join(2.0)  # it exited: what it wrote is in the pipe already
        return True

    def stop(self) -> None:
        """Stop reading (before the child's streams are closed under the reader)."""
        self._stop.set()
        self.reader.join(1.0)


@dataclasses.dataclass
class Pending:
    """Jobs submitted to a :class:`ChildRunner`: still queued, running, and done."""

    queue: list[tuple[int, ChildJob]]
    parallel: int
    running: list[Running] = dataclasses.field(default_factory=list)
    results: dict[int, ChildResult] = dataclasses.field(default_factory=dict)


class ChildRunner:
    """Owns a private temporary folder with the model (or its spec) and inputs, and runs children."""

    def __init__(
        self,
        model: Model,
        inputs: ModelInputs,
        *,
        spec: str | None,
        seed: int,
        device: str,
        dtype: str | None,
        timeout: float,
        runtime: str | None = None,
        max_batch_size: int | None = None,
        batch_invariant: int | None = None,
    ) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="samebits-"))  # mode 0700: private to this user
        self.timeout = timeout
        torch.save({"args": list(inputs.args), "kwargs": inputs.kwargs}, self.folder / "inputs.pt")
        self.base = Job(
            "trace",
            spec=spec,
            inputs_file=str(self.folder / "inputs.pt"),
            seed=seed,
            device=device,
            dtype=dtype,
            runtime=runtime,
            max_batch_size=max_batch_size,  # a child's Predictor reads the parent's calibration
            batch_invariant=batch_invariant,
        )
        self.skip_reason: str | None = None
        self._model = model
        if spec is None:
            self.skip_reason = unshippable_reason(model)
            if self.skip_reason is None:
                try:
                    torch.save(model, self.folder / "model.pt")
                    self.base = dataclasses.replace(self.base, model_file=str(self.folder / "model.pt"))
                except Exception as exc:  # e.g. a lambda or an open file inside the model
                    self.skip_reason = f"the model cannot be pickled for a child process ({type(exc).__name__}: {exc})"

    def weights_file(self) -> str | None:
        """The parent's parameters and buffers in a file of the private folder (written once), for
        children that build the model from its spec; ``None`` for a model that is no module."""
        path = self.folder / "weights.safetensors"
        if not path.exists():
            if not isinstance(self._model, nn.Module):
                return None
            from safetensors.torch import save_file

            state = {k: v.detach().cpu().contiguous() for k, v in self._model.state_dict().items()}
            save_file({k: v.clone() for k, v in state.items()}, str(path))  # clones: tied weights saved apart
        return str(path)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> ChildRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, jobs: list[ChildJob], parallel: int | None = None) -> list[ChildResult]:
        """Run ``jobs`` (at most ``parallel`` at once); each result carries its trace or its error."""
        return self.collect(self.submit(jobs, parallel))

    def submit(self, jobs: list[ChildJob], parallel: int | None = None) -> Pending:
        """Start ``jobs`` (the first ``parallel`` of them now) and return at once; :meth:`collect`
        waits for them. Work done in between runs while the children import and load."""
        pending = Pending(list(enumerate(jobs)), parallel or max(1, min(len(jobs), os.cpu_count() or 1)))
        try:
            self._fill(pending)
        except BaseException:
            self.kill(pending)
            raise
        return pending

    def _fill(self, pending: Pending) -> None:
        while pending.queue and len(pending.running) < pending.parallel:
            i, job = pending.queue.pop(0)
            pending.running.append(self._start(i, job))

    def collect(self, pending: Pending) -> list[ChildResult]:
        """Wait for every job of ``pending``; results in the order the jobs were given."""
        # Bits do not depend on how busy the machine is. Each child has its own timeout (counted
        # from its start), so the parent's watchdog rests meanwhile; an interrupt or a signal to
        # the parent kills the children still running.
        with deadline.paused():
            try:
                while pending.queue or pending.running:
                    self._fill(pending)
                    time.sleep(0.02)
                    for run in list(pending.running):
                        if not run.done(self.timeout):
                            continue
                        pending.running.remove(run)
                        pending.results[run.index] = self._collect(run, time.monotonic() - run.started)
            finally:
                self.kill(pending)
        return [pending.results[i] for i in range(len(pending.results))]

    @staticmethod
    def kill(pending: Pending) -> None:
        for run in pending.running:
            run.stop()
            run.child.kill()
        pending.running.clear()

    def _start(self, i: int, job: ChildJob) -> Running:
        weights = self.weights_file() if job.parents_weights and self.base.spec is not None else None
        request = dataclasses.replace(
            self.base,
            task=job.task,
            threads=job.threads,
            keep=tuple(job.keep or ()),
            ops=job.ops,
            hooks=job.hooks,
            params=job.params or {},
            weights_file=weights,
        )
        env = {**os.environ, **job.env}
        for name in [k for k, v in job.env.items() if v == ""]:  # "": not set in the child
            del env[name]
        child = Child(ENTRY, [job.task], env=env, pipes=True)
        with contextlib.suppress(ChildDied):  # one that died at once says why when collected
            child.send(request.message())
        child.close_input()
        return Running(i, job, child)

    def _collect(self, run: Running, elapsed: float) -> ChildResult:
        job, child = run.job, run.child
        if not run.answered and child.running:
            run.stop()
            child.kill()
            return ChildResult(job.label, None, f"timed out after {self.timeout:g} s (raise --timeout)", elapsed)
        reply = run.reply
        ended = run.failed or child.ended("child process") if reply is None else None
        run.stop()
        child.kill()  # it answered or ended: its group killed, its pipes and place among the live children released
        if reply is None:
            return ChildResult(job.label, None, ended, elapsed)
        if reply.error is not None:
            return ChildResult(job.label, None, reply.error, elapsed)
        if job.task != "trace":
            return ChildResult(job.label, None, None, elapsed, data=reply.data)
        kept: dict[str, dict[str, torch.Tensor]] = {}
        for name, t in reply.tensors.items():
            key, _, path = name.partition("|")
            kept.setdefault(key, {})[path] = t
        data = reply.data
        ops = op_calls(data["ops"]) if data.get("ops") else None
        trace = Trace.from_dict(data["trace"])
        return ChildResult(job.label, trace, None, elapsed, kept, data.get("threads"), ops, weights=data.get("weights"))
