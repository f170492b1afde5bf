"""The runtime contract: what every runner (the Predictor, the isolated worker's proxy, the
bucketed runner of ``serve --pad``) satisfies, and the typed records that pass between runtime,
serve, offline and bench. String-keyed dicts only where they leave as JSON (``describe``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from samebits.models.inputs import ModelInputs

Scheme = Literal["tile", "class", "off", "whole"]  # whole: rows coupled by design, each batch run as given


@dataclasses.dataclass(frozen=True)
class Difference:
    """One output against another on the same batch: identical bits, or the largest differences
    and the first one, in words."""

    identical: bool
    max_abs: float | None = 0.0
    max_rel: float | None = 0.0
    difference: str = "identical bits"
    batch_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Difference:
        return cls(
            bool(data["identical"]),
            data.get("max_abs"),
            data.get("max_rel"),
            str(data.get("difference", "")),
            data.get("batch_size"),
        )


@dataclasses.dataclass(frozen=True)
class Validation:
    """A runner's backend against eager on the same batch at a verified size (backend="auto": the
    backend that drifts, if one was allowed, with every candidate's comparison in ``by_backend``)."""

    backend: str
    result: Difference
    against: str = "eager"
    by_backend: Mapping[str, Difference] = dataclasses.field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return self.result.identical

    @property
    def max_abs(self) -> float | None:
        return self.result.max_abs


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A compiled backend's file for one batch size: where it is, whether this process built it
    (else another process or run did, and it was loaded), and what the build printed."""

    path: str | None
    built_here: bool
    log: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """``max_batch_size="auto"``: the largest power-of-two batch whose forward fit the budget."""

    max_batch_size: int
    budget_mb: float
    peak_mb_by_batch: Mapping[int, float]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a runner runs: its backend, the batch sizes it verified (the only ones it runs), the
    backends its forwards go through, what the plan costs (``notes``, measured), and what it was
    measured on: the weights' digest and the calibration's cache key (``None`` where its setup
    computed neither: ``invariant=False``, a runner of its own kind)."""

    backend: str  # as asked: "eager", "onnxruntime", ..., or "auto"
    scheme: Scheme  # "tile": one verified size; "class": several that agree; "off": not invariant
    sizes: tuple[int, ...]
    max_batch_size: int
    backends: tuple[str, ...]  # the backends forwards run through (several only with "auto")
    backend_by_size: Mapping[int, str] = dataclasses.field(default_factory=dict)  # "auto"
    sizes_by_length: Mapping[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # serve --pad
    notes: tuple[str, ...] = ()
    weights_sha256: str | None = None
    calibration_key: str | None = None

    @property
    def coupled(self) -> bool:
        """Rows coupled by design: each batch runs as given, never cut or padded (``whole``)."""
        return self.scheme == "whole"

    def describe(self) -> dict[str, Any]:
        """The plan as a predict manifest and the served metadata record it."""
        out: dict[str, Any] = {
            "backend": self.backend,
            "invariance": self.scheme,
            "verified_batch_sizes": list(self.sizes),
        }
        if self.backend == "auto":
            out["backend_by_size"] = {str(s): b for s, b in sorted(self.backend_by_size.items())}
        if self.sizes_by_length:
            out["verified_batch_sizes_by_length"] = {str(n): list(s) for n, s in sorted(self.sizes_by_length.items())}
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field, as JSON (across the isolated worker's pipe)."""
        return {
            **self.describe(),
            "max_batch_size": self.max_batch_size,
            "backends": list(self.backends),
            "notes": list(self.notes),
            "weights_sha256": self.weights_sha256,
            "calibration_key": self.calibration_key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        return cls(
            backend=data["backend"],
            scheme=data["invariance"],
            sizes=tuple(data["verified_batch_sizes"]),
            max_batch_size=int(data["max_batch_size"]),
            backends=tuple(data["backends"]),
            backend_by_size={int(s): b for s, b in data.get("backend_by_size", {}).items()},
            sizes_by_length={int(n): tuple(s) for n, s in data.get("verified_batch_sizes_by_length", {}).items()},
            notes=tuple(data.get("notes", ())),
            weights_sha256=data.get("weights_sha256"),
            calibration_key=data.get("calibration_key"),
        )


class Runner(Protocol):
    """What serve, predict, bench, record and check need of anything that runs a model: a batch
    in (dim 0), outputs out on the CPU; its plan; the environment it was calibrated in."""

    @property
    def plan(self) -> Plan: ...

    @property
    def fingerprint(self) -> dict[str, Any]: ...

    def predict(self, batch: ModelInputs) -> Any: ...

    def close(self) -> None: ...


class Restartable(Runner, Protocol):
    """A runner whose model lives in a process that can be ended (a forward that hangs) and
    started again from the same calibration."""

    @property
    def alive(self) -> bool: ...

    def kill(self) -> None: ...

    def restart(self) -> None: ...
