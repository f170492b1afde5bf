"""Batch invariance by measurement: which batch sizes give a row the same bits, whatever its
position and neighbours; and the plan that runs a batch only at verified sizes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


from samebits.models.inputs import ModelInputs
from samebits.measure.invariance import measure_batch_invariance


@dataclasses.dataclass
class Invariance:
    """What was measured and what was chosen: ``sizes`` are the only batch sizes ever run."""

    scheme: str  # "tile" | "class" | "off"
    sizes: list[int]
    measured: dict[str, Any]
    seconds: float = 0.0

    def plan(self, n: int) -> list[tuple[int, int]]:
        """``[(rows, run_at), ...]`` covering ``n`` rows: each chunk runs at a verified size."""
        if self.scheme == "off" or not self.sizes:
            return [(n, n)]
        out, left, top = [], n, max(self.sizes)
        while left > 0:
            rows = min(left, top)
            out.append((rows, min(s for s in self.sizes if s >= rows)))
            left -= rows
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def calibrate(
    forward: Callable[[ModelInputs], Any],
    sample: ModelInputs,
    candidates: list[int],
    *,
    seed: int = 0,
) -> Invariance:
    """The one batch-invariance measurement (:func:`samebits.measure.invariance.measure_batch_invariance`:
    the sample at the first, middle and last position, and again with other neighbours) at each
    candidate size. A size is *stable* when all its rows agree; stable sizes whose rows agree
    with each other form a class. The largest class (then the one reaching the largest size) is
    chosen. Every candidate is measured (no wall-clock cut-off: the same model on the same machine
    always chooses the same sizes); sizes whose forward raised are never used."""
    measured = measure_batch_invariance(forward, sample, candidates, seed=seed)
    classes = measured.groups(stable_only=True)
    groups = sorted(classes, key=lambda g: (len(g), max(g)), reverse=True)
    chosen = groups[0] if groups else []
    details = {
        "tried": sorted(s.size for s in measured.sizes),
        "unstable": [s.size for s in measured.measured if not s.stable],
        "classes": [sorted(g) for g in classes],
        "seconds_by_size": {s.size: s.seconds for s in measured.sizes},
        "not_tried": measured.not_tried,
        "errors": measured.errors,
    }
    scheme = "tile" if len(chosen) == 1 else "class"
    return Invariance(scheme, sorted(chosen), details, measured.seconds)
