"""What every in-process runner does with a batch, written once: prepare its tensors, refuse 0
rows, cut it into chunks that each run at a verified size (padding the last), lay every chunk in
fresh storage, join the rows and move them to the CPU. A runner says only how one chunk runs
(:meth:`BaseRunner.forward_at`) and what its plan is; :class:`~samebits.runtime.predictor.Predictor`
is one."""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import torch

from samebits.errors import UserError
from samebits.measure.batching import batch_size_of, join_outputs, lift, output_row, output_rows, pad_to, take_rows
from samebits.measure.prepare import prepare
from samebits.models import ModelInputs
from samebits.runtime.invariance import Invariance
from samebits.tensors import tree
from samebits.tensors.layout import aligned_copy, is_aligned


R = TypeVar("R", bound="BaseRunner")


class BaseRunner:
    """``predict``, ``predict_one`` and ``map`` over :meth:`forward_at`, the one step a runner
    implements. A subclass sets ``device``, ``dtype``, ``max_batch_size`` and ``invariance``
    (which sizes it verified) once it is ready, and may set itself up on its first batch
    (:meth:`_ready_for`)."""

    device: str = "cpu"
    dtype: str | None = None
    max_batch_size: int
    invariance: Invariance
    _example: ModelInputs  # a batch shaped as the model takes it (lift() follows it)

    def __init__(self) -> None:
        self._lock = threading.RLock()

    # -- what a runner implements ------------------------------------------------------------
    def forward_at(self, batch: ModelInputs, size: int | None) -> Any:
        """One forward of ``batch`` as the plan runs a batch of ``size`` rows (``batch`` has that
        size already; ``None``: inputs without a batch dim)."""
        raise NotImplementedError

    def _ready_for(self, first: ModelInputs) -> None:
        """Set up on the first batch where the runner could not at creation (nothing by default)."""

    def _usable(self) -> None:
        """Raise :class:`UserError` where the runner can no longer run (nothing by default)."""

    # -- the pipeline --------------------------------------------------------------------------
    def predict(self, batch: object) -> Any:
        """Outputs for a batch (inputs as the model takes them, batch dim 0), on the CPU."""
        prepared = self._prepare(batch)
        self._ready_for(prepared)
        return self._run(prepared)

    def predict_one(self, sample: object) -> Any:
        """The output for one sample (no batch dimension), without a batch dimension."""
        prepared = self._prepare(sample)
        self._ready_for(one_row(prepared))
        return output_row(self._run(lift([prepared], self._example)), 0, 1)

    def map(self, samples: Iterable[Any], batch_size: int | None = None, progress: bool = False) -> Iterator[Any]:
        """Outputs for every sample (no batch dim each), in input order, batched ``batch_size``
        at a time (default: the largest verified size); the last partial batch is handled. Not for
        a model whose rows are coupled by design: how the samples were grouped would change them."""
        samples = iter(samples)
        first = next(samples, None)
        if first is None:
            return
        self._ready_for(one_row(self._prepare(first)))
        samples = itertools.chain([first], samples)
        if self.invariance.scheme == "whole":
            raise UserError(
                f"map() groups samples into batches, which changes this model's outputs: {self.invariance.measured['coupled']}; call predict() on the batches you mean"
            )
        size = batch_size or (self.invariance.sizes[-1] if self.invariance.sizes else self.max_batch_size)
        pending: list[ModelInputs] = []
        done = 0
        for sample in itertools.chain(samples, [None]):  # None: the end, where the last partial batch runs
            if sample is not None:
                pending.append(self._prepare(sample))
            if pending and (len(pending) == size or sample is None):
                out = self._run(lift(pending, self._example))
                yield from (output_row(out, i, len(pending)) for i in range(len(pending)))
                done += len(pending)
                pending = []
                if progress:
                    print(f"\rsamebits: {done} samples", end="", file=sys.stderr, flush=True)

    def chunks(self, n: int) -> list[tuple[int, int]]:
        """``[(rows, size), ...]``: how a batch of ``n`` rows runs, each chunk at a verified size."""
        scheme = self.invariance.scheme
        if scheme == "whole":  # rows coupled by design: the batch as given, never cut
            return [(n, n)]
        if scheme == "off":
            return [(min(n - i, self.max_batch_size),) * 2 for i in range(0, n, self.max_batch_size)]
        return self.invariance.plan(n)

    def _run(self, batch: ModelInputs) -> Any:
        self._usable()
        n = batch_size_of(batch)
        if n is None:
            if self.invariance.scheme not in ("off", "whole"):
                raise UserError("these inputs have no batch dimension; the Predictor batches along dim 0")
            return self._to_cpu(self.forward_at(batch, None))
        if n == 0:
            raise UserError(
                "predict got a batch of 0 rows; pass at least one sample (map() over no samples yields nothing)"
            )
        plan = self.chunks(n)
        if plan == [(n, n)]:  # one forward of the whole batch (a verified size): nothing to cut or join
            with self._lock:
                return self._to_cpu(self.forward_at(fresh(batch), n))
        outputs, start = [], 0
        with self._lock:
            for rows, size in plan:
                chunk = fresh(pad_to(take_rows(batch, start, start + rows), rows, size))
                outputs.append(output_rows(self.forward_at(chunk, size), 0, rows, size))
                start += rows
        return self._to_cpu(join_outputs(outputs, [rows for rows, _ in plan]))

    def _to_cpu(self, output: object) -> Any:
        # a model on the CPU gives CPU tensors: the walk over its output is skipped there
        return output if self.device == "cpu" else tree.move(output, "cpu")

    def _prepare(self, inputs: object) -> ModelInputs:
        given = ModelInputs.from_example(inputs)
        if (
            self.device == "cpu"
            and self.dtype is None
            and all(
                isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in (*given.args, *given.kwargs.values())
            )
        ):
            return given  # tensors already where the model is (the common case): no walk
        _, moved = prepare(None, given, self.device, self.dtype)  # floats cast to the model's dtype, as the example was
        return moved

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Give back what the runner holds (nothing by default)."""


def fresh(batch: ModelInputs) -> ModelInputs:
    """``batch`` with every tensor in contiguous storage of its own, aligned as torch's allocator
    aligns it: kernels may pick another path by a pointer's alignment or a tensor's strides, so
    a view at an offset (a chunk of a larger batch, a slice a caller passed) is copied, and what
    is laid so already is used as it is."""
    given = (*batch.args, *batch.kwargs.values())
    if all(type(t) is torch.Tensor and is_aligned(t) for t in given):
        return batch  # the common case: plain tensors laid so already, no walk

    def lay(t: torch.Tensor) -> torch.Tensor:
        return t if is_aligned(t) else aligned_copy(t)

    return ModelInputs(tree.map_tensors(lay, batch.args), tree.map_tensors(lay, batch.kwargs))


def one_row(sample: ModelInputs) -> ModelInputs:
    """A batch of one from a sample without a batch dim: each tensor with a leading dim of 1 (a
    model that takes a list of images needs example inputs instead)."""
    return ModelInputs(
        tree.map_tensors(lambda t: t.unsqueeze(0), sample.args),
        tree.map_tensors(lambda t: t.unsqueeze(0), sample.kwargs),
    )
