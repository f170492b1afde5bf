"""``samebits.Predictor``: eval, inference_mode, batching, and outputs that do not depend on the
batch a sample arrives in (measured, never assumed)."""

from __future__ import annotations

import contextlib
import itertools
import re
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from samebits.errors import UserError
from samebits.limits import batch_rows
from samebits.fingerprint.diff import CALIBRATION_WITHOUT, bit_relevant_digest
from samebits.models import ModelInputs
from samebits.models.target import as_loaded, eval_mode, inputs_for
from samebits.runtime.cache import ArtifactCache, artifact_key, default_cache_dir
from samebits.runtime.backends import BACKENDS
from samebits.runtime.backends import backend as registered
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
from samebits.measure.invariance import coupled_rows
from samebits.measure.prepare import prepare
from samebits.measure.model_state import evaluating, hold
from samebits.determinism.fill import asks_for_uninitialized, filling
from samebits.determinism.shared import acquire_profile, release_profile
from samebits.determinism.portable import require as require_level
from samebits.fingerprint.capture import device_identity
from samebits.runtime import fixed_order
from samebits.runtime.batch_invariant import BatchInvariant, tiles_of
from samebits.runtime.invariance import (
    Invariance,
    bits_against,
    cached_calibration,
    calibrate,
    candidate_sizes,
    over_budget,
    time_forwards,
)
from samebits.runtime.artifacts import Runners, input_shapes
from samebits.runtime.plan import Difference, MemoryPlan, Plan, Validation
from samebits.tensors import tree
from samebits.tensors.layout import aligned_copy, is_aligned

if TYPE_CHECKING:
    from samebits.runtime.auto import AutoPlan
    from samebits.runtime.generate import Generation, TileGenerator

DEFAULT_MAX_BATCH = 256


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
    ``portable`` names the baseline this process must run (``samebits run --portable LEVEL``
    starts it so): refused in one line where it does not, since a running process cannot take it.
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
        calibration_budget: float = 60.0,
        memory_budget_mb: float | None = None,
        seed: int = 0,
        allow_backend_drift: bool = False,
        auto_backends: tuple[str, ...] | None = None,
        batch_invariant: bool | int = False,
        portable: str | None = None,
    ) -> None:
        self.portable = require_level(portable)
        self._tiles = tiles_of(batch_invariant, backend)
        if backend != "auto":
            registered(backend, also=("auto",))
        for name in auto_backends or ():
            if name not in BACKENDS:
                raise UserError(f"unknown backend '{name}' in auto_backends; choose from {', '.join(BACKENDS)}")
        if max_batch_size is not None and max_batch_size != "auto":
            batch_rows(max_batch_size, "max_batch_size")
        if tile is not None:
            batch_rows(tile, "tile")
        loaded = as_loaded(model_or_spec)
        model = loaded.model
        given = example_inputs is not None or loaded.example_inputs is not None
        example = inputs_for(loaded, example_inputs) if given else None
        self.device, self.backend, self.seed, self.dtype = device, backend, seed, dtype
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._lock = threading.RLock()
        self._generators: dict[tuple[int, int, str | None], TileGenerator] = {}
        self._release: weakref.finalize[[], Predictor] | None = None
        # the caller's model, given back as it was at close() or garbage collection
        self._give_back: weakref.finalize[[], Predictor] | None = None
        self._moved = self._closed = False
        self._state = None
        if isinstance(model, nn.Module):
            self._state, release = hold(model)
            self._give_back = weakref.finalize(self, release)
        if deterministic:
            acquire_profile(seed, device)
            self._release = weakref.finalize(self, release_profile)  # also when collected unclosed
        self._given_model = model
        self._settings = (max_batch_size, invariant, tile, calibration_budget, memory_budget_mb)
        self._auto_settings = (auto_backends, allow_backend_drift)
        self._ready = False
        self._running: int | None = None  # the thread inside running()
        if example is not None:
            self._setup(example)

    def _setup(self, example: ModelInputs) -> None:
        """Prepare the model, calibrate and validate on ``example`` (at creation, or on the first
        batch where no example inputs were given)."""
        max_batch_size, invariant, tile, calibration_budget, memory_budget_mb = self._settings
        backend, device = self.backend, self.device
        try:
            from samebits.fingerprint import Fingerprint

            self.fingerprint: dict[str, Any] = Fingerprint.for_device(device).to_dict()
            self.model, self._example = prepare(self._given_model, example, device, self.dtype)
            self._weights_sha256: str | None = None
            if isinstance(self.model, nn.Module):
                for param in eval_mode(self.model).parameters():  # per tensor: ScriptModules refuse requires_grad_
                    param.requires_grad_(False)
            self._moved = self._state.settle() if self._state is not None else False
            self._modules = list(self.model.modules()) if isinstance(self.model, nn.Module) else []
            # Export once with a dynamic batch dim where it can work: not for a list input (images),
            # whose length torch.export cannot make dynamic; those get one file per batch size.
            dynamic = backend == "onnxruntime" and not any(
                isinstance(a, list) for a in [*self._example.args, *self._example.kwargs.values()]
            )
            self._runners = Runners(backend, self.model, _weakly(self.example_at), self.cache_dir, device, dynamic)
            self._fill_needed = self._needs_fill()
            self.artifacts = self._runners.artifacts  # by batch size: each compiled file, built here or loaded
            self._sample = take_sample(self._example, 0) if batch_size_of(self._example) is not None else None
            self.memory: MemoryPlan | None = None
            self.notes: list[str] = []  # what the user should know about this predictor's plan
            if max_batch_size == "auto":
                self.memory = self._auto_max_batch(memory_budget_mb)
                self.max_batch_size: int = self.memory.max_batch_size
            else:
                self.max_batch_size = max_batch_size or tile or DEFAULT_MAX_BATCH  # type: ignore[assignment]
            self.invariant, self.tile, self.memory_budget_mb = invariant, tile, memory_budget_mb
            self.members: dict[str, Predictor] = {}  # backend="auto": one Predictor per backend it runs
            self.auto: AutoPlan | None = None
            if backend == "auto":
                self._auto(calibration_budget, *self._auto_settings)
            else:
                self.invariance = self._invariance(invariant, tile, calibration_budget)
                self.notes += self.invariance.notes()
                self.validation = self._validate()
            self.plan = Plan(
                backend=backend,
                scheme=self.invariance.scheme,  # type: ignore[arg-type]
                sizes=tuple(self.invariance.sizes),
                max_batch_size=self.max_batch_size,
                backends=self.auto.chosen if self.auto else (backend,),
                backend_by_size=self.auto.backend_by_size if self.auto else {},
                notes=tuple(self.notes),
            )
            self._ready = True
        except BaseException:
            self.close()  # a failed setup leaves no profile behind
            raise

    def _needs_fill(self) -> bool:
        """Whether forwards need uninitialized memory filled (determinism/fill.py): only where the
        backend runs the eager forward and one forward of the example asks for such memory."""
        if self.backend == "auto" or not registered(self.backend).eager_dispatch:
            return True  # auto: each member decides for its own backend
        with torch.inference_mode(), evaluating(self._modules), self._tiled():
            return asks_for_uninitialized(lambda: self._example.call(self.model)) is not None

    def _set_up_on(self, batch: ModelInputs) -> None:
        """No example inputs were given: calibrate on this first batch, saying so once."""
        with self._lock:
            if self._ready:
                return
            warnings.warn(
                "samebits.Predictor: no example inputs were given, so it calibrates on the first batch it "
                "runs (pass example_inputs=... to calibrate at creation)",
                stacklevel=3,
            )
            self._setup(batch)

    # -- setup -------------------------------------------------------------------------------
    @property
    def weights_sha256(self) -> str:
        """:func:`~samebits.runtime.cache.weights_digest` of the model as set up (computed once:
        the calibration key and a predict manifest both need it)."""
        if self._weights_sha256 is None:
            from samebits.runtime.cache import weights_digest

            self._weights_sha256 = weights_digest(self.model)
        return self._weights_sha256

    @property
    def sample(self) -> ModelInputs | None:
        """The example's first sample (one row), or ``None`` where its inputs have no batch dim."""
        return self._sample

    @property
    def example(self) -> ModelInputs:
        """The example inputs the predictor calibrated on, on its device."""
        return self._example

    def example_at(self, size: int) -> ModelInputs:
        """A batch of ``size`` rows: the example's first sample and seeded random neighbours."""
        assert self._sample is not None
        gen = torch.Generator().manual_seed(self.seed)
        return concat_batches([self._sample, *[random_neighbour(self._sample, gen) for _ in range(size - 1)]])

    def _auto_max_batch(self, budget_mb: float | None) -> MemoryPlan:
        """The largest power-of-two batch whose forward fits the memory budget."""
        from samebits.measure.memory import default_memory_cap_mb, largest_batch

        if self._sample is None:
            raise UserError("max_batch_size='auto' needs inputs with a batch dimension")
        budget = budget_mb or default_memory_cap_mb(self.device)
        best, measured = largest_batch(self.model, self.example_at, budget, self.device)
        return MemoryPlan(best, round(budget, 1), measured)

    def _coupling(self) -> str | None:
        """Why the rows of a batch are coupled by design (an output ``[B, B]``), or ``None``."""
        if self._sample is None:
            return None
        with torch.inference_mode():
            return coupled_rows(lambda batch: batch.call(self.model), self._sample, seed=self.seed)

    def _invariance(self, invariant: bool, tile: int | None, budget: float) -> Invariance:
        if not invariant:
            coupled = self._coupling()
            if coupled is not None:
                return Invariance("whole", [], {"coupled": coupled})
            return Invariance("off", [], {"reason": "invariant=False"})
        if self._sample is None:
            raise UserError("invariant=True needs inputs with a batch dimension (dim 0); pass invariant=False")
        candidates = [tile] if tile else candidate_sizes(self.max_batch_size)
        key = artifact_key(
            self.model,
            {
                "kind": "calibration",
                # 4: timed forwards; 5: inputs named as ModelInputs.leaves(); 6: budgets stop sizes; 7: neighbours
                # over the batch's integer ranges, rows alone where neighbours matter, tiles of one layout
                "version": 7,
                "device": device_identity(self.device),  # a CUDA calibration is not a CPU one
                "batch_invariant": self._batch_invariant_kind(),  # tiled ops give other bits
                "dynamic_batch": self._runners.dynamic,
                "backend": self.backend,
                "candidates": candidates,
                "sample": input_shapes(self._sample),
                "environment": bit_relevant_digest(self.fingerprint, CALIBRATION_WITHOUT),
            },
            weights=self.weights_sha256,
        )
        self.calibration_key = key  # what else is measured for this plan can be cached under it
        sample = self._sample

        def measure() -> Invariance:
            coupled = self._coupling()
            if coupled is not None:  # no size keeps a row's meaning: each batch runs whole, as given
                return Invariance("whole", [], {"coupled": coupled})
            self._runners.at(candidates[0])  # build (or load) the artifact before the calibration is timed
            from samebits.measure.memory import default_memory_cap_mb

            inv = calibrate(
                lambda batch: self.run_at(batch, batch_size_of(batch)),
                sample,
                candidates,
                seed=self.seed,
                budget=budget,
                memory_mb=self.memory_budget_mb or default_memory_cap_mb(self.device),
                device=self.device,
            )
            inv.measured.update(self._time_forwards(inv, budget))
            return inv

        what = f"{type(self.model).__name__} on {self.backend}, {self.device}, up to {self.max_batch_size} rows"
        inv = cached_calibration(ArtifactCache(self.cache_dir), key, measure, what)
        note = over_budget(inv, candidates, budget)
        if note is not None:
            self.notes.append(note)
            warnings.warn(note, stacklevel=3)
        if inv.scheme == "whole":
            if tile:
                raise UserError(f"tile {tile} cannot be used here: {inv.measured['coupled']}")
            return inv
        if tile and inv.sizes != [tile]:
            raise UserError(
                f"tile {tile} is not batch-invariant here: a row's bits change with its position or neighbours (measured)"
            )
        if not inv.sizes:
            raise UserError(no_sizes_reason(inv, self.max_batch_size, self.device))
        return inv

    def member(self, backend: str, budget: float) -> Predictor:
        """A Predictor for one backend on this predictor's (prepared) model, inputs, cache and
        invariance settings: what ``backend="auto"`` measures and runs."""
        return Predictor(
            self.model,
            device=self.device,
            backend=backend,
            invariant=self.invariant,
            tile=self.tile,
            max_batch_size=self.max_batch_size,
            deterministic=False,  # the profile is this predictor's
            cache_dir=self.cache_dir,
            example_inputs=self._example,
            calibration_budget=budget,
            memory_budget_mb=self.memory_budget_mb,
            seed=self.seed,
        )

    def _auto(self, budget: float, asked: tuple[str, ...] | None, allow_drift: bool) -> None:
        """backend="auto": the plan (which backend runs which verified size) measured, or read
        from the cache under the same key rules as the calibration."""
        from samebits.runtime import auto

        names = auto.candidates_for(self.device, asked)
        self.calibration_key = auto.plan_key(self, names, allow_drift)
        self.auto, self.members = auto.plan_auto(self, names, self.calibration_key, budget, allow_drift)
        self.invariance = self.auto.invariance(self.invariant)
        self.notes += [self.auto.describe(), *self.invariance.notes()]
        self.validation = self.auto.validation()

    def _time_forwards(self, inv: Invariance, budget: float) -> dict[str, Any]:
        """One forward timed at every verified size, at 1 row and at the largest size tried (what
        the plan's choice and its notes compare), sizes whose forward raised left out."""
        if not inv.sizes:
            return {}
        ran = set(inv.measured["tried"]) - set(inv.measured["failed"])
        batches = {s: self.example_at(s) for s in {*inv.sizes, 1, max(ran)} & ran}
        return time_forwards(lambda s: self.run_at(batches[s], s), list(batches), min(0.5, budget / 10))

    def _validate(self) -> Validation:
        """This backend against eager on the example inputs (at a verified size)."""
        if self.backend == "eager":
            return Validation("eager", Difference(True))
        size = self.invariance.sizes[-1] if self.invariance.sizes else batch_size_of(self._example)
        example = self.example_at(size) if self._sample is not None and size else self._example
        with torch.inference_mode():
            ours = self.run_at(example, size)
            eager = example.call(self.model)
        return Validation(self.backend, bits_against(tree.move(eager, "cpu"), tree.move(ours, "cpu"), size))

    # -- running -----------------------------------------------------------------------------
    def run_at(self, batch: ModelInputs, size: int | None) -> Any:
        """One forward of ``batch`` as the plan runs a batch of ``size`` rows (no padding, no
        cutting: ``batch`` has that size already)."""
        if self.members:
            return self.members[self._backend_at(size)].run_at(batch, size)
        if self._running == threading.get_ident():  # inside running(): the switches are set already
            return batch.call(self._runners.at(size))
        with self._switches():
            return batch.call(self._runners.at(size))

    def _switches(self) -> contextlib.AbstractContextManager[Any]:
        """What every forward runs under: inference mode, eval (even after the give-back), the
        tiles where asked for, the fill of uninitialized memory where needed."""
        with contextlib.ExitStack() as stack:  # one that raises leaves none of the others entered
            for switch in (
                torch.inference_mode(),
                evaluating(self._modules),
                self._tiled(),
                filling(self._fill_needed),
            ):
                stack.enter_context(switch)
            return stack.pop_all()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Many :meth:`predict` calls in a row from this thread (a shard of an offline run): the
        per-forward switches entered once and the lock held for the whole block (measured: entering
        them per call was 5% of a 0.6 ms forward). Nothing changes where the Predictor is not set up
        yet (it sets up on the first batch) or runs ``backend="auto"`` (its members switch per call)."""
        if not self._ready or self.members or self._running is not None:
            yield  # not set up yet (it sets up on the first batch), auto's members, or nested
            return
        with self._lock, self._switches():
            self._running = threading.get_ident()
            try:
                yield
            finally:
                self._running = None

    def _batch_invariant_kind(self) -> Any:
        """What ``batch_invariant=`` runs here: the tile size, with the fixed-order kernels on
        CUDA where Triton is installed (other bits than the tiles)."""
        if self._tiles and self.device.startswith("cuda") and fixed_order.unavailable() is None:
            return [self._tiles, "fixed-order"]
        return self._tiles

    def _tiled(self) -> contextlib.AbstractContextManager[Any]:
        """:func:`samebits.batch_invariant` where asked for (``batch_invariant=``), else nothing."""
        return BatchInvariant(self._tiles) if self._tiles else contextlib.nullcontext()

    def _backend_at(self, size: int | None) -> str:
        """backend="auto": the backend chosen for ``size`` (an unmeasured size, which only
        invariant=False runs, takes the choice at the next measured size up)."""
        assert self.auto is not None
        by_size = self.auto.backend_by_size
        if size is not None and size in by_size:
            return by_size[size]
        above = [s for s in by_size if size is None or s >= size]
        return by_size[min(above)] if above else by_size[max(by_size)]

    def _forward(self, batch: ModelInputs) -> Any:
        self._still_placed()
        n = batch_size_of(batch)
        if n is None:
            if self.invariance.scheme not in ("off", "whole"):
                raise UserError("these inputs have no batch dimension; the Predictor batches along dim 0")
            return self._to_cpu(self.run_at(batch, None))
        if n == 0:
            raise UserError(
                "predict got a batch of 0 rows; pass at least one sample (map() over no samples yields nothing)"
            )
        if self.invariance.scheme == "whole":  # rows coupled by design: the batch as given, never cut
            plan = [(n, n)]
        elif self.invariance.scheme == "off":
            plan = [(min(n - i, self.max_batch_size),) * 2 for i in range(0, n, self.max_batch_size)]
        else:
            plan = self.invariance.plan(n)
        if plan == [(n, n)]:  # one forward of the whole batch (a verified size): nothing to cut or join
            with self._lock:
                return self._to_cpu(self.run_at(fresh(batch), n))
        outputs, start = [], 0
        with self._lock:
            for rows, size in plan:
                chunk = fresh(pad_to(take_rows(batch, start, start + rows), rows, size))
                outputs.append(output_rows(self.run_at(chunk, size), 0, rows, size))
                start += rows
        return self._to_cpu(join_outputs(outputs, [rows for rows, _ in plan]))

    def _to_cpu(self, output: Any) -> Any:
        # a model on the CPU gives CPU tensors: the walk over its output is skipped there
        return output if self.device == "cpu" else tree.move(output, "cpu")

    def _prepare(self, inputs: Any) -> ModelInputs:
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

    def predict(self, batch: Any) -> Any:
        """Outputs for a batch (inputs as the model takes them, batch dim 0), on the CPU."""
        prepared = self._prepare(batch)
        if not self._ready:
            self._set_up_on(prepared)
        return self._forward(prepared)

    def predict_one(self, sample: Any) -> Any:
        """The output for one sample (no batch dimension), without a batch dimension."""
        prepared = self._prepare(sample)
        if not self._ready:
            self._set_up_on(one_row(prepared))
        return output_row(self._forward(self._batch_of([prepared])), 0, 1)

    def generate(
        self,
        prompts: Any,
        max_new_tokens: int = 20,
        *,
        tile: int | None = None,
        bucket: int = 32,  # runtime.generate.DEFAULT_BUCKET
        return_scores: bool = False,
        check: bool = True,
        attention: str | None = "eager",
    ) -> list[Generation]:
        """Greedy generation (a transformers-style decoder-only model) whose tokens and scores
        for each prompt equal those it gets alone, whatever other prompts share the call and in
        what order: every prompt runs in tiles of ``tile`` rows (default: the largest verified
        batch size up to 32) left-padded to a multiple of ``bucket`` tokens (fewer widths, fewer tiles), and with ``check``
        the first tile at each width is measured against its prompts run alone. ``attention``:
        the implementation generation runs on (eager: CPU SDPA was measured to let a row's bits
        depend on its neighbours; ``None`` leaves the model's). ``prompts``: a
        list of 1-D token-id tensors, or ``{"input_ids", "attention_mask"}``. Returns one
        :class:`~samebits.runtime.generate.Generation` per prompt, in order."""
        from samebits.runtime.generate import TileGenerator, prompt_list

        if not self._ready:
            raise UserError("generate() needs the Predictor calibrated: pass example_inputs=... when creating it")
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be an integer >= 1, not {max_new_tokens!r}")
        if not isinstance(bucket, int) or bucket < 1 or (tile is not None and (not isinstance(tile, int) or tile < 1)):
            raise UserError("tile and bucket must be integers >= 1")
        tile = tile or max([s for s in self.invariance.sizes if s <= 32] or [min(8, self.max_batch_size)])
        key = (tile, bucket, attention)
        if key not in self._generators:
            self._generators[key] = TileGenerator(self.model, tile, bucket, self._lock, attention)
        self._still_placed()
        with evaluating(self._modules), filling(True):  # the probe saw a plain forward, not generation's paths
            return self._generators[key].generate(prompt_list(prompts), max_new_tokens, return_scores, check)

    def _batch_of(self, samples: list[ModelInputs]) -> ModelInputs:
        """Samples without a batch dim (list models: single images) as one batch."""
        return lift(samples, self._example)

    def map(self, samples: Iterable[Any], batch_size: int | None = None, progress: bool = False) -> Iterator[Any]:
        """Outputs for every sample (no batch dim each), in input order, batched ``batch_size``
        at a time (default: the largest verified size); the last partial batch is handled. Not for
        a model whose rows are coupled by design: how the samples were grouped would change them."""
        samples = iter(samples)
        if not self._ready:
            first = next(samples, None)
            if first is None:
                return
            self._set_up_on(one_row(self._prepare(first)))
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
                yield from self._flush(pending)
                done += len(pending)
                pending = []
                if progress:
                    print(f"\rsamebits: {done} samples", end="", file=sys.stderr, flush=True)

    def _flush(self, pending: list[ModelInputs]) -> Iterator[Any]:
        out = self._forward(self._batch_of(pending))
        for i in range(len(pending)):
            yield output_row(out, i, len(pending))

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """End the determinism profile (restoring every switch) and give the model back as it was
        (training flags, ``requires_grad``, device, dtype). The predictor can still run (in eval
        mode), unless it had moved the model to another device or dtype."""
        if self._release is not None:
            self._release()  # runs once: later calls do nothing
        if self._give_back is not None:
            self._give_back()
        self._closed = True

    def _still_placed(self) -> None:
        if self._closed and self._moved:
            raise UserError(
                "this Predictor was closed and gave its model back on its own device and dtype; create a new one"
            )

    def __enter__(self) -> Predictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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


def no_sizes_reason(inv: Invariance, max_batch_size: int, device: str) -> str:
    """Why a calibration verified no size: the forward raised at every size (an op torch's
    deterministic algorithms have no kernel for, named), else no size kept a row's bits."""
    errors = inv.measured.get("errors") or []
    failed = set(inv.measured.get("failed") or [])
    if errors and failed >= set(inv.measured.get("tried") or []):
        first = str(errors[0]).split(": ", 1)[-1]
        strict = re.search(r"(\S+(?: \S+)?) does not have a deterministic implementation", first)
        if strict:
            return (
                f"{strict.group(1)} has no deterministic implementation on {device}, and the Predictor runs under "
                "torch's deterministic algorithms (samebits.deterministic()): pass deterministic=False, or replace "
                "the op"
            )
        return f"the model's forward raised at every batch size tried: {first}"
    return f"no batch size up to {max_batch_size} is invariant here (measured: {inv.measured}); pass invariant=False"


def _weakly(method: Any) -> Any:
    """``method`` of an object, called without holding the object: a Predictor's runners must not
    keep it alive (a cycle left an unreachable Predictor holding the model in eval, grad off,
    until a garbage collection)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = ref()
        if bound is None:
            raise RuntimeError("the Predictor was closed")
        return bound(*args)

    return call
