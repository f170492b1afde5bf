"""``samebits.Predictor``: eval, inference_mode, batching, and outputs that do not depend on the
batch a sample arrives in (measured, never assumed)."""

from __future__ import annotations

import json
import os
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from samebits.errors import UserError, first_line
from samebits.fingerprint.diff import bit_relevant_digest
from samebits.models import ModelInputs
from samebits.models.target import as_loaded, inputs_for
from samebits.runtime.cache import ArtifactCache, artifact_key, default_cache_dir
from samebits.runtime.backends import BACKENDS, BackendUnavailable, backend_versions, build
from samebits.measure.batching import (
    batch_size_of,
    concat_batches,
    join_outputs,
    lift,
    output_row,
    output_rows,
    pad_to,
    random_neighbour,
    take_rows,
    take_sample,
)
from samebits.measure.prepare import prepare
from samebits.runtime.invariance import Invariance, calibrate
from samebits.tensors import tree
from samebits.tensors.compare import compare

DEFAULT_MAX_BATCH = 256


def _shapes(inputs: ModelInputs) -> list[Any]:
    return [
        (p, str(t.dtype), list(t.shape))
        for p, t in tree.flatten(inputs.as_tree()).items()
        if isinstance(t, torch.Tensor)
    ]


_PROFILE_LOCK = threading.Lock()
_PROFILE: dict[str, Any] = {"count": 0, "context": None}


def _acquire_profile(seed: int, device: str) -> None:
    """The determinism profile is shared by every live deterministic Predictor: the first one
    enters it (seeding with its seed), the last one to close (or be collected) exits it, so
    Predictors closed in any order leave every switch as it was before the first."""
    from samebits.determinism import deterministic

    with _PROFILE_LOCK:
        if _PROFILE["count"] == 0:
            context = deterministic(seed, device=device)
            context.__enter__()
            _PROFILE["context"] = context
        _PROFILE["count"] += 1


def _release_profile() -> None:
    with _PROFILE_LOCK:
        _PROFILE["count"] -= 1
        if _PROFILE["count"] == 0:
            context, _PROFILE["context"] = _PROFILE["context"], None
            context.__exit__(None, None, None)


class Predictor:
    """Inference done right by default: ``eval()``, no grad, inputs moved to the device, outputs
    on the CPU, and with ``invariant=True`` a sample's output never depends on its batch.

    Invariance is measured at creation: which batch sizes give a row the same bits at every
    position and with other neighbours (or the given ``tile``); every forward then runs only at
    those sizes, padding by repeating a real sample and splitting above the largest. The
    calibration is cached under ``cache_dir``, keyed by the model and the environment
    fingerprint; compiled backends are files keyed by content, built once and loaded by every
    process. With ``deterministic=True`` the :func:`samebits.deterministic` profile is applied
    for the predictor's lifetime (until :meth:`close`, the end of its ``with`` block, or its
    garbage collection); live Predictors share one profile, restored when the last one ends.
    """

    def __init__(
        self,
        model_or_spec: Any,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        backend: str = "eager",
        invariant: bool = True,
        tile: int | None = None,
        max_batch_size: int | str | None = None,
        deterministic: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        example_inputs: Any = None,
        calibration_budget: float = 5.0,
        memory_budget_mb: float | None = None,
        seed: int = 0,
    ) -> None:
        if backend not in BACKENDS:
            raise UserError(f"unknown backend '{backend}'; choose from {', '.join(BACKENDS)}")
        if (
            max_batch_size is not None
            and max_batch_size != "auto"
            and (not isinstance(max_batch_size, int) or max_batch_size < 1)
        ):
            raise UserError(f"max_batch_size must be an integer >= 1 or 'auto', not {max_batch_size!r}")
        if tile is not None and tile < 1:
            raise UserError("tile must be >= 1")
        loaded = as_loaded(model_or_spec)
        model = loaded.model
        example = inputs_for(
            loaded,
            example_inputs,
            hint="the Predictor needs example inputs (example_inputs=...) to calibrate and validate",
        )
        self.device, self.backend, self.seed = device, backend, seed
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._lock = threading.RLock()
        self._release: weakref.finalize | None = None
        if deterministic:
            _acquire_profile(seed, device)
            self._release = weakref.finalize(self, _release_profile)  # also when collected unclosed
        try:
            from samebits.fingerprint import Fingerprint

            self.fingerprint = Fingerprint.capture().to_dict()
            self.model, self._example = prepare(model, example, device, dtype)
            if isinstance(self.model, nn.Module):
                self.model.eval().requires_grad_(False)
            self._runners: dict[int, Any] = {}
            # Export once with a dynamic batch dim where it can work: not for a list input (images),
            # whose length torch.export cannot make dynamic; those get one file per batch size.
            self._dynamic = backend == "onnxruntime" and not any(
                isinstance(a, list) for a in [*self._example.args, *self._example.kwargs.values()]
            )
            self.artifacts: dict[int, dict[str, Any]] = {}
            self._sample = take_sample(self._example, 0) if batch_size_of(self._example) is not None else None
            self.memory: dict[str, Any] = {}
            self.notes: list[str] = []  # what the user should know about this predictor's plan
            if max_batch_size == "auto":
                self.max_batch_size = self._auto_max_batch(memory_budget_mb)
            else:
                self.max_batch_size = max_batch_size or tile or DEFAULT_MAX_BATCH  # type: ignore[assignment]
            self.invariance = self._invariance(invariant, tile, calibration_budget)
            self.notes += self.invariance.notes()
            self.validation = self._validate()
        except BaseException:
            self.close()  # a failed setup leaves no profile behind
            raise

    # -- setup -------------------------------------------------------------------------------
    def _example_at(self, size: int) -> ModelInputs:
        assert self._sample is not None
        gen = torch.Generator().manual_seed(self.seed)
        return concat_batches([self._sample, *[random_neighbour(self._sample, gen) for _ in range(size - 1)]])

    def _runner(self, size: int | None) -> Any:
        if self.backend == "eager" or size is None:
            return self.model
        slot = 0 if self._dynamic else size  # a dynamic-batch artifact serves every size
        if slot not in self._runners:
            # A dynamic batch is exported from a batch of 2 or more: torch.export specialises a dim of size 1.
            example = self._example_at(max(size, 2) if self._dynamic else size)
            shapes = [(p, d, ["N", *s[1:]] if self._dynamic else s) for p, d, s in _shapes(example)]
            key = artifact_key(
                self.model,
                {
                    "backend": self.backend,
                    "versions": backend_versions(self.backend),
                    "shapes": shapes,
                    "device": self.device,
                    "dynamic_batch": self._dynamic,
                },
            )
            try:  # idle ONNX Runtime threads would spin and slow everything else: spinning off
                built = build(
                    self.backend, self.model, example, self.cache_dir, key, spinning=False, dynamic_batch=self._dynamic
                )
            except BackendUnavailable:
                if not self._dynamic:
                    raise
                self._dynamic = False  # the model does not export with a dynamic batch: one file per size
                return self._runner(size)
            except UserError:
                raise
            except Exception as exc:
                raise BackendUnavailable(
                    f"the {self.backend} backend could not be built for this model: {first_line(exc, with_type=True)}"
                ) from exc
            self._runners[slot] = built.runner
            self.artifacts[size] = {
                "path": str(built.artifact) if built.artifact else None,
                "built_here": built.built_here,
                "log": built.log,
            }
        return self._runners[slot]

    def _auto_max_batch(self, budget_mb: float | None, limit: int = 4096) -> int:
        """The largest power-of-two batch whose forward fits the memory budget (CUDA: the
        largest that does not run out of memory, backing off and emptying the cache)."""
        from samebits.measure.memory import default_memory_cap_mb, peak_of

        if self._sample is None:
            raise UserError("max_batch_size='auto' needs inputs with a batch dimension")
        budget = budget_mb or default_memory_cap_mb()
        measured: dict[int, float] = {}
        best, size = 1, 1
        while size <= limit:
            batch = self._example_at(size)
            try:
                with torch.inference_mode():
                    measured[size] = round(peak_of(lambda: batch.call(self.model), self.device), 2)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                break
            if measured[size] > budget:
                break
            best, size = size, size * 2
        self.memory = {"max_batch_size": best, "budget_mb": round(budget, 1), "peak_mb_by_batch": measured}
        return best

    def _invariance(self, invariant: bool, tile: int | None, budget: float) -> Invariance:
        if not invariant:
            return Invariance("off", [], {"reason": "invariant=False"})
        if self._sample is None:
            raise UserError("invariant=True needs inputs with a batch dimension (dim 0); pass invariant=False")
        candidates = (
            [tile]
            if tile
            else sorted(
                {s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256) if s <= self.max_batch_size} | {self.max_batch_size}
            )
        )
        key = artifact_key(
            self.model,
            {
                "kind": "calibration",
                "version": 3,  # 3: the shared measurement (first, middle, last position)
                "dynamic_batch": self._dynamic,
                "backend": self.backend,
                "candidates": candidates,
                "sample": _shapes(self._sample),
                "environment": bit_relevant_digest(self.fingerprint),
            },
        )
        self.calibration_key = key  # what else is measured for this plan can be cached under it
        store, name = ArtifactCache(self.cache_dir), f"calibration-{key}.json"
        data = store.read_json(name)
        if data is not None and {"scheme", "sizes", "measured", "seconds"} <= set(data):
            inv = Invariance(data["scheme"], data["sizes"], {**data["measured"], "cached": True}, data["seconds"])
        else:  # missing, or corrupt (then rebuilt, with a warning)
            self._runner(candidates[0])  # build (or load) the artifact before the calibration is timed
            inv = calibrate(
                lambda batch: self._run_at(batch, batch_size_of(batch)), self._sample, candidates, seed=self.seed
            )
            if store.writable or not store.is_cache:
                store.build_once(name, lambda tmp: tmp.write_text(json.dumps(inv.to_dict())), kind="calibration")
        if "cached" not in inv.measured and inv.seconds > budget:
            costs = inv.measured.get("seconds_by_size") or {}
            top = max((int(k) for k in costs), default=0)
            note = (
                f"calibration measured every batch size up to {max(candidates)} in {inv.seconds:.1f} s, over its {budget:g} s budget "
                f"(size {top} alone took {float(costs.get(top, costs.get(str(top), 0.0))):.2f} s); it is cached now, and a smaller "
                "max_batch_size calibrates faster"
            )
            self.notes.append(note)
            warnings.warn(note, stacklevel=3)
        if tile and inv.sizes != [tile]:
            raise UserError(
                f"tile {tile} is not batch-invariant here: a row's bits change with its position or neighbours (measured)"
            )
        if not inv.sizes:
            raise UserError(
                f"no batch size up to {self.max_batch_size} is invariant here (measured: {inv.measured}); pass invariant=False"
            )
        return inv

    def _validate(self) -> dict[str, Any]:
        """This backend against eager on the example inputs (at a verified size)."""
        if self.backend == "eager":
            return {"backend": "eager", "identical": True, "against": "eager"}
        size = self.invariance.sizes[-1] if self.invariance.sizes else batch_size_of(self._example)
        example = self._example_at(size) if self._sample is not None and size else self._example
        with torch.inference_mode():
            ours = self._run_at(example, size)
            eager = example.call(self.model)
        result = compare(tree.move(eager, "cpu"), tree.move(ours, "cpu"))
        worst = result.first_difference()
        return {
            "backend": self.backend,
            "against": "eager",
            "identical": result.identical,
            "max_abs": worst.max_abs if worst else 0.0,
            "max_rel": worst.max_rel if worst else 0.0,
            "difference": worst.brief() if worst else "identical bits",
            "batch_size": size,
        }

    # -- running -----------------------------------------------------------------------------
    def _run_at(self, batch: ModelInputs, size: int | None) -> Any:
        with torch.inference_mode():
            return batch.call(self._runner(size))

    def _forward(self, batch: ModelInputs) -> Any:
        n = batch_size_of(batch)
        if n is None:
            if self.invariance.scheme != "off":
                raise UserError("these inputs have no batch dimension; the Predictor batches along dim 0")
            return tree.move(self._run_at(batch, None), "cpu")
        if n == 0:
            raise UserError(
                "predict got a batch of 0 rows; pass at least one sample (map() over no samples yields nothing)"
            )
        plan = (
            self.invariance.plan(n)
            if self.invariance.scheme != "off"
            else [(min(n - i, self.max_batch_size),) * 2 for i in range(0, n, self.max_batch_size)]
        )
        outputs, start = [], 0
        with self._lock:
            for rows, size in plan:
                chunk = pad_to(take_rows(batch, start, start + rows), rows, size)
                outputs.append(output_rows(self._run_at(chunk, size), 0, rows, size))
                start += rows
        return tree.move(join_outputs(outputs, [rows for rows, _ in plan]), "cpu")

    def _prepare(self, inputs: Any) -> ModelInputs:
        _, moved = prepare(None, ModelInputs.from_example(inputs), self.device)
        return moved

    def predict(self, batch: Any) -> Any:
        """Outputs for a batch (inputs as the model takes them, batch dim 0), on the CPU."""
        return self._forward(self._prepare(batch))

    def predict_one(self, sample: Any) -> Any:
        """The output for one sample (no batch dimension), without a batch dimension."""
        return output_row(self._forward(self._batch_of([self._prepare(sample)])), 0, 1)

    def _batch_of(self, samples: list[ModelInputs]) -> ModelInputs:
        """Samples without a batch dim (list models: single images) as one batch."""
        return lift(samples, self._example)

    def map(self, samples: Iterable[Any], batch_size: int | None = None, progress: bool = False) -> Iterator[Any]:
        """Outputs for every sample (no batch dim each), in input order, batched ``batch_size``
        at a time (default: the largest verified size); the last partial batch is handled."""
        size = batch_size or (self.invariance.sizes[-1] if self.invariance.sizes else self.max_batch_size)
        pending: list[ModelInputs] = []
        done = 0
        bar = _progress() if progress else None
        for sample in samples:
            pending.append(self._prepare(sample))
            if len(pending) == size:
                yield from self._flush(pending)
                done += len(pending)
                pending = []
                if bar:
                    bar(done)
        if pending:
            yield from self._flush(pending)
            if bar:
                bar(done + len(pending))

    def _flush(self, pending: list[ModelInputs]) -> Iterator[Any]:
        out = self._forward(self._batch_of(pending))
        for i in range(len(pending)):
            yield output_row(out, i, len(pending))

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """End the determinism profile (restoring every switch); the predictor can still run."""
        if self._release is not None:
            self._release()  # runs once: later calls do nothing

    def __enter__(self) -> Predictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _progress() -> Any:
    import sys

    def show(done: int) -> None:
        print(f"\rsamebits: {done} samples", end="", file=sys.stderr, flush=True)

    return show


class PredictorModel:
    """A Predictor as a callable model whose calls go through :meth:`Predictor.predict`; this is
    how ``samebits check --runtime predictor`` runs its axes."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.predictor.predict(ModelInputs(args, kwargs))


def parse_runtime(runtime: str) -> str:
    """``predictor`` or ``predictor:BACKEND`` -> the backend name."""
    kind, _, backend = runtime.partition(":")
    if kind != "predictor":
        raise UserError(f"unknown runtime '{runtime}'; use predictor or predictor:BACKEND ({', '.join(BACKENDS)})")
    backend = backend or "eager"
    if backend not in BACKENDS:
        raise UserError(f"unknown backend '{backend}' in --runtime; choose from {', '.join(BACKENDS)}")
    return backend


def runtime_model(model: Any, inputs: ModelInputs, runtime: str, cache_dir: str | None = None) -> PredictorModel:
    """Wrap ``model`` in a Predictor for ``runtime`` (``predictor[:BACKEND]``)."""
    return PredictorModel(Predictor(model, backend=parse_runtime(runtime), example_inputs=inputs, cache_dir=cache_dir))
