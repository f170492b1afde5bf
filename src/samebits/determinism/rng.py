"""Seeding every RNG, isolating RNG state, and seeding DataLoader workers reproducibly."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from samebits.errors import UserError

MAX_SEED = 2**32 - 1  # NumPy's legacy global RNG takes seeds in [0, 2**32 - 1]


def check_seed(seed: int) -> int:
    """Validate a seed for every RNG samebits seeds."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}] (NumPy's global RNG takes no other), got {seed}")
    return seed


def cuda_rng_in_reach(device: str | None = None) -> bool:
    """Whether CUDA RNG states may be read: CUDA already initialised, or CUDA asked for.

    Reading them otherwise would initialise CUDA behind the user's back.
    """
    if not (torch.version.cuda or torch.version.hip):
        return False
    if device is not None and str(device).startswith("cuda"):
        return torch.cuda.is_available()
    return torch.cuda.is_initialized()


def seed_everything(seed: int | None = None, *, device: str | None = None) -> int:
    """Seed Python ``random``, NumPy's global RNG and torch (CPU and every CUDA device); return the seed.

    ``seed=None`` reads ``SAMEBITS_SEED`` (which ``samebits run --seed N`` sets), else 0. This is
    an explicit setter: nothing is restored, and ``SAMEBITS_SEED`` is set so that child
    processes can read the seed back the same way. Use :func:`samebits.deterministic` for a scoped version, and
    ``samebits run`` for ``PYTHONHASHSEED`` (which only works before the interpreter starts).
    CUDA generators that are not initialised yet are seeded lazily by torch when CUDA starts.
    """
    if seed is None:
        text = os.environ.get("SAMEBITS_SEED", "0")
        try:
            seed = int(text)
        except ValueError:
            raise UserError(f"SAMEBITS_SEED={text!r} is not an integer seed") from None
    seed_rngs(seed, device=device)
    os.environ["SAMEBITS_SEED"] = str(seed)
    return seed


def seed_rngs(seed: int, *, device: str | None = None) -> None:
    """Seed Python ``random``, NumPy's global RNG and torch (CPU and CUDA); nothing else."""
    check_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds CUDA devices (lazily when CUDA is not initialised)
    if cuda_rng_in_reach(device):
        torch.cuda.manual_seed_all(seed)


def capture_rng_states(device: str | None = None) -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's global RNGs (CUDA only when in reach)."""
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if cuda_rng_in_reach(device):
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Put back states taken by :func:`capture_rng_states`."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states:
        torch.cuda.set_rng_state_all(states["cuda"])


@contextlib.contextmanager
def isolate_rng(device: str | None = None) -> Iterator[None]:
    """Run a block and put every global RNG back as it was, also when the block raises."""
    states = capture_rng_states(device)
    try:
        yield
    finally:
        restore_rng_states(states)


def worker_init_fn(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed ``random`` and NumPy in each worker from torch's worker seed.

    torch already gives each worker ``base_seed + worker_id`` for its own RNG, where the base
    seed comes from the DataLoader's ``generator``; NumPy and ``random`` are not seeded by torch.
    """
    seed = torch.initial_seed() % (MAX_SEED + 1)
    random.seed(seed)
    np.random.seed(seed)


def dataloader_kwargs(seed: int = 0) -> dict[str, Any]:
    """Keyword arguments for ``DataLoader`` that make shuffling and every worker's RNGs reproducible.

    ``DataLoader(dataset, shuffle=True, num_workers=4, **dataloader_kwargs(0))``
    """
    check_seed(seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return {"generator": generator, "worker_init_fn": worker_init_fn}
