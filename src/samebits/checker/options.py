"""The knobs of ``samebits check`` and their defaults, declared once: ``check()``'s signature and
the CLI's options both read them. Imports no torch, so ``--help`` stays fast."""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class CheckOptions:
    """The knobs of ``samebits check`` (see its ``--help``)."""

    axes: tuple[str, ...] = ("repeat", "seed", "state", "process", "threads", "batch", "layout")
    runs: int = 3
    processes: int = 2
    threads: tuple[int, ...] | None = None  # None: 1 and the default thread count
    batch_sizes: tuple[int, ...] = (1, 2, 3, 4, 7, 8, 16, 32)
    batch_dim: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    seed: int = 0
    device: str = "cpu"
    dtype: str | None = None
    timeout: float = 120.0
    localize: bool = True
    runtime: str | None = None  # "predictor" or "predictor:BACKEND": run the axes through a Predictor
    max_batch_size: int | None = None  # with runtime: the largest batch its Predictor calibrates (None: 256)
    batch_invariant: int | None = None  # run every forward in samebits.batch_invariant(tile) (the tile)

    def thread_counts(self) -> tuple[int, ...]:
        if self.threads:
            return tuple(dict.fromkeys(self.threads))
        import torch

        default = torch.get_num_threads()
        return tuple(dict.fromkeys((1, default, os.cpu_count() or default)))
