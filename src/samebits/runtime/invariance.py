"""Batch invariance by measurement: which batch sizes give a row the same bits, whatever its
position and neighbours; and the plan that runs a batch only at verified sizes."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from samebits.models.inputs import ModelInputs
from samebits.probe.batching import concat_batches, output_row, random_neighbour
from samebits.tensors.digest import digest_tree


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


def _row_key(forward: Callable[[ModelInputs], Any], batch: ModelInputs, size: int, row: int) -> str:
    return repr(sorted(digest_tree(output_row(forward(batch), row, size)).items()))


def calibrate(
    forward: Callable[[ModelInputs], Any],
    sample: ModelInputs,
    candidates: list[int],
    *,
    seed: int = 0,
    budget: float = 5.0,
) -> Invariance:
    """For each candidate size: the sample at the first and the last position with random
    neighbours, and at the first again with other neighbours. A size is *stable* when all three
    rows agree; stable sizes whose rows agree with each other form a class. The largest class
    (then the one reaching the largest size) is chosen. Sizes not measured within ``budget``
    seconds are never used."""
    start = time.monotonic()
    gen = torch.Generator().manual_seed(seed)
    keys: dict[int, str] = {}
    unstable: list[int] = []
    seconds: dict[int, float] = {}
    not_tried: list[int] = []
    for size in sorted(set(candidates)):
        if time.monotonic() - start > budget and keys:
            not_tried.append(size)
            continue
        began = time.monotonic()
        if size == 1:
            keys[1] = _row_key(forward, sample, 1, 0)
            seconds[1] = round(time.monotonic() - began, 3)
            continue
        others = [random_neighbour(sample, gen) for _ in range(size - 1)]
        first = _row_key(forward, concat_batches([sample, *others]), size, 0)
        last = _row_key(forward, concat_batches([*others, sample]), size, size - 1)
        fresh = _row_key(
            forward, concat_batches([sample, *[random_neighbour(sample, gen) for _ in range(size - 1)]]), size, 0
        )
        if first == last == fresh:
            keys[size] = first
        else:
            unstable.append(size)
        seconds[size] = round(time.monotonic() - began, 3)
    classes: dict[str, list[int]] = {}
    for size, key in keys.items():
        classes.setdefault(key, []).append(size)
    groups = sorted(classes.values(), key=lambda g: (len(g), max(g)), reverse=True)
    chosen = groups[0] if groups else []
    measured = {
        "tried": sorted(keys) + unstable,
        "unstable": unstable,
        "classes": [sorted(g) for g in classes.values()],
        "seconds_by_size": seconds,
        "not_tried": not_tried,
    }
    scheme = "tile" if len(chosen) == 1 else "class"
    return Invariance(scheme, sorted(chosen), measured, round(time.monotonic() - start, 3))
