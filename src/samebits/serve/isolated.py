"""``samebits serve --isolate``: the model runs in a child process (``python -m samebits.child
serve``, serve/worker.py), so that a forward that hangs can be ended: the child is killed and a new
one started from the same calibration (the artifact cache), and the server is not ready until it
is back. Tensors cross the pipe as safetensors, never pickles (:mod:`samebits.measure.wire`).

The parent sends the :class:`~samebits.measure.job.Job` once and the child answers ``ready``; then
each batch is a message of named input tensors (``args.N``/``kwargs.NAME``) and each reply the
named outputs, or an error."""

from __future__ import annotations

import threading
from typing import Any

import torch

from samebits.errors import UserError
from samebits.measure.job import ENTRY, Job
from samebits.measure.spawn import Child, ChildDied, ProtocolError
from samebits.measure.wire import Message
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Plan
from samebits.serve.signature import Signature, TensorSpec


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

        self.job = Job(
            "serve", params={"spec": model_spec, "options": dataclasses.asdict(options), "cache_dir": cache_dir}
        )
        self._lock = threading.Lock()
        self.child: Child | None = None
        self.restarts = 0
        self.ready = self._start()
        self.signature = signature_from(self.ready["signature"])
        self.plan = Plan.from_dict(self.ready["plan"])
        self.fingerprint: dict[str, Any] = self.ready["fingerprint"]
        self.not_ready: str | None = self.ready.get("not_ready")

    def _start(self) -> dict[str, Any]:
        child = self.child = Child(ENTRY, ["serve"], pipes=True)
        try:
            child.send(self.job.message())
            answer = child.reply()
        except ChildDied as exc:
            child.kill()
            why = exc if isinstance(exc, ProtocolError) else child.tail()
            raise UserError(f"the model's worker process could not start: {why}") from None
        if answer.error is not None:
            child.kill()
            raise UserError(answer.error)
        return answer.data["ready"]  # type: ignore[no-any-return]

    def predict(self, inputs: ModelInputs) -> dict[str, torch.Tensor]:
        """The named outputs of one batch, computed in the child; :class:`ChildDied` when the
        child is not running or ends before it answers."""
        with self._lock:
            child = self.child
            if child is None or not child.running:
                raise ChildDied("the model's worker process is not running")
            try:
                child.send(Message({}, inputs.named()))
                answer = child.reply()
                if answer.error is not None:
                    raise RuntimeError(answer.error)
                return answer.tensors
            except ProtocolError as exc:
                child.kill()  # a worker out of step is restarted like one that died
                raise ChildDied(f"the model's worker process: {exc}") from None
            except ChildDied:
                raise ChildDied(child.ended("the model's worker process")) from None

    @property
    def alive(self) -> bool:
        """Whether the child process is running (not killed from outside, not dead)."""
        return self.child is not None and self.child.running

    def kill(self) -> None:
        """End the child now (a forward that hangs); a waiting :meth:`predict` gets ChildDied."""
        if self.child is not None:
            self.child.kill()

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
        if self.child is not None:
            self.child.finish()

    def __enter__(self) -> IsolatedPredictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
