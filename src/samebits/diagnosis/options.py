"""The defaults of ``samebits doctor``, declared once: ``doctor()``'s signature and the CLI's
options read them. Imports no torch, so ``--help`` stays fast."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DoctorOptions:
    """The knobs of ``samebits doctor`` (see its ``--help``)."""

    device: str = "cpu"
    iterations: int = 50  # forwards of the memory probe, in a fresh process
    memory_cap_mb: float | None = None  # None: a quarter of the machine's memory, at most 2 GiB
    batch: int = 32  # the batch of the throughput and batch-variance probes
    backends: tuple[str, ...] = ("torchscript", "onnxruntime", "compile")
    timeout: float = 180.0
    budget: float = 2.0  # seconds of timing per probe
