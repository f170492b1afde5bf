"""A runner's plan, measured: which batch sizes keep a row's bits (cached under a key of the
model's weights and code, the backend and the bit-relevant environment), the memory budget's
largest batch, and the backend against eager. Reads a runner through :class:`Calibrated`, so
it imports no runner."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any, Protocol

import torch

from samebits.errors import UserError
from samebits.fingerprint.capture import device_identity
from samebits.fingerprint.diff import CALIBRATION_WITHOUT, bit_relevant_digest
from samebits.measure.batching import batch_size_of
from samebits.measure.invariance import coupled_rows
from samebits.models import ModelInputs
from samebits.runtime.artifacts import input_shapes
from samebits.runtime.cache import ArtifactCache, artifact_key
from samebits.runtime.invariance import (
    Invariance,
    bits_against,
    cached_calibration,
    calibrate,
    candidate_sizes,
    over_budget,
    time_forwards,
)
from samebits.runtime.plan import Difference, MemoryPlan, Validation
from samebits.tensors import tree
from samebits.models.inputs import Model

# 4: timed forwards; 5: inputs named as ModelInputs.leaves(); 6: budgets stop sizes; 7: neighbours over
# the batch's integer ranges, rows alone where neighbours matter, tiles of one layout
CALIBRATION_VERSION = 7


class Calibrated(Protocol):
    """What a calibration reads of its runner: the prepared model and its example, how one
    forward runs at a size, and what keys the result."""

    model: Model
    device: str
    backend: str
    seed: int
    max_batch_size: int
    memory_budget_mb: float | None
    cache_dir: Path
    fingerprint: dict[str, Any]

    @property
    def sample(self) -> ModelInputs | None: ...

    @property
    def example(self) -> ModelInputs: ...

    @property
    def weights_sha256(self) -> str: ...

    def example_at(self, size: int) -> ModelInputs: ...

    def forward_at(self, batch: ModelInputs, size: int | None) -> Any: ...

    def build_at(self, size: int) -> None: ...

    def calibration_facts(self) -> dict[str, Any]: ...


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The sizes a runner runs (``invariance``), the cache key of that measurement (what else is
    measured for the plan is cached under it), and what the user should know of it."""

    invariance: Invariance
    key: str | None = None
    notes: tuple[str, ...] = ()


def coupling(runner: Calibrated) -> str | None:
    """Why the rows of a batch are coupled by design (an output ``[B, B]``), or ``None``."""
    if runner.sample is None:
        return None
    with torch.inference_mode():
        return coupled_rows(lambda batch: batch.call(runner.model), runner.sample, seed=runner.seed)


def measure_invariance(runner: Calibrated, invariant: bool, tile: int | None, budget: float) -> Calibration:
    """The batch sizes ``runner`` may run (``tile`` alone where given), measured or read from the
    cache; one :class:`UserError` line where none can run."""
    if not invariant:
        coupled = coupling(runner)
        if coupled is not None:
            return Calibration(Invariance("whole", [], {"coupled": coupled}))
        return Calibration(Invariance("off", [], {"reason": "invariant=False"}))
    sample = runner.sample
    if sample is None:
        raise UserError("invariant=True needs inputs with a batch dimension (dim 0); pass invariant=False")
    candidates = [tile] if tile else candidate_sizes(runner.max_batch_size)
    facts = {
        "kind": "calibration",
        "version": CALIBRATION_VERSION,
        "device": device_identity(runner.device),  # a CUDA calibration is not a CPU one
        **runner.calibration_facts(),  # tiles and dynamic batches give other bits
        "backend": runner.backend,
        "candidates": candidates,
        "sample": input_shapes(sample),
        "environment": bit_relevant_digest(runner.fingerprint, CALIBRATION_WITHOUT),
    }
    key = artifact_key(runner.model, facts, weights=runner.weights_sha256)

    def measure() -> Invariance:
        coupled = coupling(runner)
        if coupled is not None:  # no size keeps a row's meaning: each batch runs whole, as given
            return Invariance("whole", [], {"coupled": coupled})
        runner.build_at(candidates[0])  # build (or load) the artifact before the calibration is timed
        from samebits.measure.memory import default_memory_cap_mb

        inv = calibrate(
            lambda batch: runner.forward_at(batch, batch_size_of(batch)),
            sample,
            candidates,
            seed=runner.seed,
            budget=budget,
            memory_mb=runner.memory_budget_mb or default_memory_cap_mb(runner.device),
            device=runner.device,
        )
        inv.measured.update(_time_forwards(runner, inv, budget))
        return inv

    what = f"{type(runner.model).__name__} on {runner.backend}, {runner.device}, up to {runner.max_batch_size} rows"
    inv = cached_calibration(ArtifactCache(runner.cache_dir), key, measure, what)
    note = over_budget(inv, candidates, budget)
    if note is not None:
        warnings.warn(note, stacklevel=5)  # at the line that created the Predictor
    if inv.scheme == "whole":
        if tile:
            raise UserError(f"tile {tile} cannot be used here: {inv.measured['coupled']}")
    elif tile and inv.sizes != [tile]:
        raise UserError(
            f"tile {tile} is not batch-invariant here: a row's bits change with its position or neighbours (measured)"
        )
    elif not inv.sizes:
        raise UserError(no_sizes_reason(inv, runner.max_batch_size, runner.device))
    return Calibration(inv, key, (note,) if note else ())


def _time_forwards(runner: Calibrated, inv: Invariance, budget: float) -> dict[str, Any]:
    """One forward timed at every verified size, at 1 row and at the largest size tried (what
    the plan's choice and its notes compare), sizes whose forward raised left out."""
    if not inv.sizes:
        return {}
    ran = set(inv.measured["tried"]) - set(inv.measured["failed"])
    batches = {s: runner.example_at(s) for s in {*inv.sizes, 1, max(ran)} & ran}
    return time_forwards(lambda s: runner.forward_at(batches[s], s), list(batches), min(0.5, budget / 10))


def largest_batch(runner: Calibrated, budget_mb: float | None) -> MemoryPlan:
    """``max_batch_size="auto"``: the largest power-of-two batch whose forward fits the memory budget."""
    from samebits.measure.memory import default_memory_cap_mb, largest_batch as measure

    if runner.sample is None:
        raise UserError("max_batch_size='auto' needs inputs with a batch dimension")
    budget = budget_mb or default_memory_cap_mb(runner.device)
    best, measured = measure(runner.model, runner.example_at, budget, runner.device)
    return MemoryPlan(best, round(budget, 1), measured)


def validate(runner: Calibrated, invariance: Invariance) -> Validation:
    """The runner's backend against eager on the example inputs (at a verified size)."""
    if runner.backend == "eager":
        return Validation("eager", Difference(True))
    size = invariance.sizes[-1] if invariance.sizes else batch_size_of(runner.example)
    example = runner.example_at(size) if runner.sample is not None and size else runner.example
    with torch.inference_mode():
        ours = runner.forward_at(example, size)
        eager = example.call(runner.model)
    return Validation(runner.backend, bits_against(tree.move(eager, "cpu"), tree.move(ours, "cpu"), size))


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
