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


@dataclasses.dataclass(frozen=True)
class PredictorOptions:
    """The policy of one :class:`samebits.Predictor` (its keyword arguments but the model, the
    example inputs and the cache folder), as a value: what a worker process, a member of
    ``backend="auto"`` or a served replica is built from. ``checked()`` refuses bad values in
    one line each; ``to_dict``/``from_dict`` carry it as JSON."""

    device: str = "cpu"
    dtype: str | None = None
    backend: str = "eager"
    invariant: bool = True
    tile: int | None = None
    max_batch_size: int | str | None = None  # None: the tile, else 256; "auto": what fits the memory budget
    deterministic: bool = True
    calibration_budget: float = 60.0
    memory_budget_mb: float | None = None
    seed: int = 0
    allow_backend_drift: bool = False
    auto_backends: tuple[str, ...] | None = None
    batch_invariant: bool | int = False
    portable: str | None = None

    def checked(self) -> PredictorOptions:
        """These options, or a :class:`~samebits.errors.UserError` naming the first bad one."""
        from samebits.errors import UserError
        from samebits.limits import batch_rows
        from samebits.runtime.backends import BACKENDS, backend

        if self.backend != "auto":
            backend(self.backend, also=("auto",))
        for name in self.auto_backends or ():
            if name not in BACKENDS:
                raise UserError(f"unknown backend '{name}' in auto_backends; choose from {', '.join(BACKENDS)}")
        if self.max_batch_size is not None and self.max_batch_size != "auto":
            batch_rows(self.max_batch_size, "max_batch_size")
        if self.tile is not None:
            batch_rows(self.tile, "tile")
        return self

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> PredictorOptions:
        """The options a :meth:`to_dict` wrote (fields this version does not know are left out)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        return cls(**values)  # type: ignore[arg-type]
