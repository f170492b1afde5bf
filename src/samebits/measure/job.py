"""What a parent asks of a child process (:class:`Job`) and what comes back (:class:`Reply`),
as typed records that travel as :class:`~samebits.measure.wire.Message` headers."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from samebits.measure.wire import Message

ENTRY = "samebits.child"  # the module every child process runs: python -m samebits.child TASK

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass(frozen=True)
class Job:
    """A task by name (``python -m samebits.child TASK``), the model it loads and how it runs.
    A model comes as a ``spec`` the child builds or a ``model_file`` the parent wrote into its
    private folder; ``params`` are the task's own."""

    task: str
    spec: str | None = None
    model_file: str | None = None
    inputs_file: str | None = None
    weights_file: str | None = None  # the parent's weights, loaded into a model built from its spec
    seed: int = 0
    device: str = "cpu"
    dtype: str | None = None
    threads: int | None = None
    runtime: str | None = None  # wrap the model in a Predictor with this backend
    max_batch_size: int | None = None
    batch_invariant: int | None = None  # the tile every forward runs in
    keep: tuple[str, ...] = ()  # modules whose outputs come back as tensors (trace)
    ops: tuple[str, int] | None = None  # (module, call): op digests inside it (trace)
    hooks: bool = False  # per-module digests (trace)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    def message(self) -> Message:
        return Message({"job": dataclasses.asdict(self)})

    @classmethod
    def from_message(cls, message: Message) -> Job:
        """The job a message carries; ``ValueError`` for one that is not a job of this version."""
        data = message.header.get("job")
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not isinstance(data.get("task"), str) or set(data) - names:
            raise ValueError(f"not a samebits job: {sorted(data) if isinstance(data, dict) else type(data).__name__}")
        fields = dict(data)
        fields["keep"] = tuple(fields.get("keep") or ())
        if fields.get("ops") is not None:
            fields["ops"] = (str(fields["ops"][0]), int(fields["ops"][1]))
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class Reply:
    """A child's answer: ``data`` and ``tensors``, or an ``error`` in one line (``internal``: a
    bug rather than the user's input)."""

    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None
    internal: bool = False
    tensors: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    def message(self) -> Message:
        return Message({"data": self.data, "error": self.error, "internal": self.internal}, self.tensors)

    @classmethod
    def from_message(cls, message: Message) -> Reply:
        h = message.header
        if not isinstance(h.get("data"), dict) or not isinstance(h.get("error"), (str, type(None))):
            raise ValueError("not a samebits reply")
        return cls(h["data"], h["error"], bool(h.get("internal")), message.tensors)
