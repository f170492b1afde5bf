"""The knobs of ``samebits record`` and their defaults, declared once for ``record()`` and the CLI."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RecordOptions:
    """The knobs of ``samebits record`` (see its ``--help``)."""

    force: bool = False  # overwrite an existing golden
    deterministic: bool = True  # run inside samebits.deterministic()
    seed: int = 0  # of the determinism profile (and of random inputs)
    threads: int | None = None  # intra-op threads during the run
    runtime: str | None = None  # "predictor[:BACKEND]": record through a Predictor (what serve runs)
    device: str = "cpu"  # where the model runs; verify runs on the same kind of device
