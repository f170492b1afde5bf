"""The knobs of ``samebits bench`` and their defaults, declared once: ``bench()``'s signature and
the CLI's options both read them. Imports no torch, so ``--help`` stays fast."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """The knobs of ``samebits bench`` (see its ``--help``)."""

    batch_sizes: tuple[int, ...] = (1, 8, 32, 64)
    backends: tuple[str, ...] = ("eager", "onnxruntime")
    rounds: int = 20  # interleaved rounds per batch size (fewer when the budget runs out)
    budget: float = 3.0  # seconds of timing per batch size
    memory: bool = True  # peak memory, one fresh process per configuration
    max_batch_size: int | None = None  # the Predictors calibrate up to this (None: the largest of batch_sizes)
    timeout: float = 120.0  # CLI: seconds a forward may go without progress
    device: str = "cpu"  # where the model and the Predictors run
