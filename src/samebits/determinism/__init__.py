"""Determinism switches: set them all, in the right order, record them, restore them."""

from samebits.determinism.catalog import snapshot
from samebits.determinism.context import DeterminismRecord, deterministic, fast
from samebits.determinism.rng import (
    capture_rng_states,
    dataloader_kwargs,
    isolate_rng,
    restore_rng_states,
    seed_everything,
    worker_init_fn,
)
from samebits.determinism.switches import SwitchChange

__all__ = [
    "DeterminismRecord",
    "SwitchChange",
    "capture_rng_states",
    "dataloader_kwargs",
    "deterministic",
    "fast",
    "isolate_rng",
    "restore_rng_states",
    "seed_everything",
    "snapshot",
    "worker_init_fn",
]
