"""``samebits.Predictor``: eval, inference_mode, batching, and outputs that do not depend on the
batch a sample arrives in (measured, never assumed)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from samebits.errors import UserError
from samebits.models import ModelInputs
from samebits.models.target import ModelOrSpec, as_loaded, eval_mode, inputs_for
from samebits.runtime.cache import default_cache_dir
from samebits.runtime.backends import backend as registered
from samebits.measure.batching import batch_size_of, concat_batches, random_neighbour, take_sample
from samebits.measure.prepare import prepare
from samebits.measure.model_state import evaluating
from samebits.determinism.fill import filling
from samebits.determinism.portable import require as require_level
from samebits.runtime.batch_invariant import tiles_of
from samebits.runtime.auto import AutoPlan, AutoRunner, Member
from samebits.runtime.custody import Custody
from samebits.runtime.forward_mode import ForwardMode
from samebits.runtime.options import PredictorOptions
from samebits.runtime.calibration import largest_batch, measure_invariance, validate
from samebits.runtime.artifacts import Runners
from samebits.runtime.plan import MemoryPlan, Plan
from samebits.runtime.runner import BaseRunner

if TYPE_CHECKING:
    from samebits.runtime.generate import Generation, TileGenerator

DEFAULT_MAX_BATCH = 256


class Predictor(BaseRunner):
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

    _auto: AutoRunner | None = None  # backend="auto": the member Predictor that runs each size
    calibration_key: str | None = None  # the calibration's cache key; what else is measured for the plan keys on it

    def __init__(
        self,
        model_or_spec: ModelOrSpec,
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
        self.options = PredictorOptions(
            device, dtype, backend, invariant, tile, max_batch_size, deterministic, calibration_budget,
            memory_budget_mb, seed, allow_backend_drift, auto_backends, batch_invariant, portable,
        ).checked()  # fmt: skip
        self.portable = require_level(portable)
        self._tiles = tiles_of(batch_invariant, backend)
        loaded = as_loaded(model_or_spec)
        model = loaded.model
        given = example_inputs is not None or loaded.example_inputs is not None
        example = inputs_for(loaded, example_inputs) if given else None
        self.device, self.backend, self.seed, self.dtype = device, backend, seed, dtype
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        super().__init__()
        self.generators: dict[tuple[int, int, str | None], TileGenerator] = {}  # by tile, bucket, attention
        self._custody = Custody(self, model, deterministic, seed, device)
        self._given_model = model
        self._ready = False
        if example is not None:
            self._setup(example)

    def _setup(self, example: ModelInputs) -> None:
        """Prepare the model, calibrate and validate on ``example`` (at creation, or on the first
        batch where no example inputs were given)."""
        o = self.options
        backend, device, max_batch_size, invariant, tile = o.backend, o.device, o.max_batch_size, o.invariant, o.tile
        try:
            from samebits.fingerprint import Fingerprint

            self.fingerprint: dict[str, Any] = Fingerprint.for_device(device).to_dict()
            self.model, self._example = prepare(self._given_model, example, device, self.dtype)
            self._weights_sha256: str | None = None
            if isinstance(self.model, nn.Module):
                for param in eval_mode(self.model).parameters():  # per tensor: ScriptModules refuse requires_grad_
                    param.requires_grad_(False)
            self._custody.settle()
            self._mode = ForwardMode(self.model, self._tiles, device)
            # Export once with a dynamic batch dim where it can work: not for a list input (images),
            # whose length torch.export cannot make dynamic; those get one file per batch size.
            dynamic = backend == "onnxruntime" and not any(
                isinstance(a, list) for a in [*self._example.args, *self._example.kwargs.values()]
            )
            self._runners = Runners(backend, self.model, _weakly(self.example_at), self.cache_dir, device, dynamic)
            if backend != "auto" and registered(backend).eager_dispatch:  # auto: each member decides for its own
                self._mode.measure_fill(lambda: self._example.call(self.model))
            self.artifacts = self._runners.artifacts  # by batch size: each compiled file, built here or loaded
            self._sample = take_sample(self._example, 0) if batch_size_of(self._example) is not None else None
            self.memory: MemoryPlan | None = None
            self.notes: list[str] = []  # what the user should know about this predictor's plan
            if max_batch_size == "auto":
                self.memory = largest_batch(self, o.memory_budget_mb)
                self.max_batch_size: int = self.memory.max_batch_size
            else:
                self.max_batch_size = max_batch_size or tile or DEFAULT_MAX_BATCH  # type: ignore[assignment]
            self.invariant, self.tile, self.memory_budget_mb = invariant, tile, o.memory_budget_mb
            if backend == "auto":  # which backend runs which verified size: measured, or read from the cache
                self._auto = AutoRunner(self, o.auto_backends, o.allow_backend_drift, o.calibration_budget)
                self.calibration_key, self.invariance = self._auto.key, self._auto.plan.invariance(invariant)
                self.notes += [self._auto.plan.describe(), *self.invariance.notes()]
                self.validation = self._auto.plan.validation()
            else:
                calibration = measure_invariance(self, invariant, tile, o.calibration_budget)
                self.invariance, self.calibration_key = calibration.invariance, calibration.key
                self.notes += [*calibration.notes, *self.invariance.notes()]
                self.validation = validate(self, self.invariance)
            self.plan = Plan(
                backend=backend,
                scheme=self.invariance.scheme,  # type: ignore[arg-type]
                sizes=tuple(self.invariance.sizes),
                max_batch_size=self.max_batch_size,
                backends=self.auto.chosen if self.auto else (backend,),
                backend_by_size=dict(self.auto.backend_by_size) if self.auto else {},
                notes=tuple(self.notes),
                weights_sha256=self._weights_sha256,  # as the calibration computed it (None where nothing needed it)
                calibration_key=self.calibration_key,
            )
            self._ready = True
        except BaseException:
            self.close()  # a failed setup leaves no profile behind
            raise

    def _ready_for(self, batch: ModelInputs) -> None:
        """No example inputs were given: calibrate on this first batch, saying so once."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            warnings.warn(
                "samebits.Predictor: no example inputs were given, so it calibrates on the first batch it "
                "runs (pass example_inputs=... to calibrate at creation)",
                stacklevel=4,
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

    def member(self, backend: str, budget: float) -> Predictor:
        """A Predictor for one backend on this predictor's (prepared) model, inputs, cache and
        invariance settings: what ``backend="auto"`` measures and runs (the profile is this one's)."""
        o = dataclasses.replace(self.options, backend=backend, deterministic=False, calibration_budget=budget)
        o = dataclasses.replace(o, max_batch_size=self.max_batch_size, dtype=None, portable=None)
        return Predictor(self.model, cache_dir=self.cache_dir, example_inputs=self._example, **o.to_dict())  # type: ignore[arg-type]

    @property
    def auto(self) -> AutoPlan | None:
        """backend="auto": what it measured and chose (``None`` for one backend)."""
        return self._auto.plan if self._auto is not None else None

    @property
    def members(self) -> dict[str, Member]:
        """backend="auto": the runner of each backend it chose (empty for one backend)."""
        return dict(self._auto.members) if self._auto is not None else {}

    def build_at(self, size: int) -> None:
        """Build (or load) the backend's artifact for ``size`` rows."""
        self._runners.at(size)

    def calibration_facts(self) -> dict[str, Any]:
        """What else keys this runner's calibration: tiled ops and a dynamic-batch export give other bits."""
        return {"batch_invariant": self._mode.kind(), "dynamic_batch": self._runners.dynamic}

    # -- running -----------------------------------------------------------------------------
    def forward_at(self, batch: ModelInputs, size: int | None) -> Any:
        """One forward of ``batch`` as the plan runs a batch of ``size`` rows (no padding, no
        cutting: ``batch`` has that size already)."""
        if self._auto is not None:
            return self._auto.forward_at(batch, size)
        return self._mode.call(lambda: batch.call(self._runners.at(size)))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Many :meth:`predict` calls in a row from this thread (a shard of an offline run): the
        per-forward switches entered once and the lock held for the whole block (measured: entering
        them per call was 5% of a 0.6 ms forward)."""
        if not self._ready or self._auto is not None:
            yield  # not set up yet (it sets up on the first batch), or auto's members, which switch per call
            return
        with self._mode.running(self._lock):
            yield

    def generate(
        self,
        prompts: object,
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
        from samebits.runtime.generate import generate_on

        if not self._ready:
            raise UserError("generate() needs the Predictor calibrated: pass example_inputs=... when creating it")
        self._usable()
        with evaluating(self._mode.modules), filling(True):  # the probe saw a plain forward, not generation's paths
            return generate_on(self, prompts, max_new_tokens, tile, bucket, return_scores, check, attention)

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """End the determinism profile (restoring every switch) and give the model back as it was
        (training flags, ``requires_grad``, device, dtype). The predictor can still run (in eval
        mode), unless it had moved the model to another device or dtype."""
        self._custody.release()

    def _usable(self) -> None:  # BaseRunner's hook: refused once the model was given back moved
        self._custody.usable()


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
