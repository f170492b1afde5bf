"""The one batch-invariance measurement, shared by the check's batch axis, doctor's SB152 and the
Predictor's calibration: for each batch size, one sample's row with random neighbours at the
first, middle and last position of one forward, and again with other neighbours."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from samebits.errors import first_line
from samebits.measure.batching import concat_batches, output_rows, random_neighbour
from samebits.measure.memory import device_mb, peak_of
from samebits.models.inputs import ModelInputs
from samebits.tensors.digest import digest_tree
from samebits.tensors.tree import flatten


def row_key(output: object) -> str:
    """A key equal for two outputs exactly when their bits are."""
    return repr(sorted(digest_tree(output).items()))


@dataclasses.dataclass
class SizeRows:
    """What one batch size gave the sample: its row at each position (a batch of one each)."""

    size: int
    rows: dict[int, Any] = dataclasses.field(default_factory=dict)  # position -> row output
    keys: dict[int, str] = dataclasses.field(default_factory=dict)  # position -> row_key
    fresh_key: str | None = None  # position 0 again, with other neighbours (None: not measured)
    seconds: float = 0.0
    peak_mb: float | None = None  # what its forwards added to the memory peak (with a memory budget)
    error: str | None = None

    @property
    def key(self) -> str | None:
        """The key at the first position (the size's result)."""
        return self.keys.get(0)

    @property
    def positions_agree(self) -> bool:
        return len(set(self.keys.values())) <= 1

    @property
    def neighbours_agree(self) -> bool:
        return self.fresh_key is None or self.fresh_key == self.key

    @property
    def stable(self) -> bool:
        """The row's bits depend neither on its position nor on its neighbours at this size."""
        return self.error is None and self.positions_agree and self.neighbours_agree


@dataclasses.dataclass
class BatchInvariance:
    """Every size measured (size 1 is the sample alone), in order; sizes past a budget are in
    ``not_tried``, and ``stopped`` says which budget stopped them."""

    sizes: list[SizeRows]
    not_tried: list[int]
    seconds: float
    stopped: str | None = None

    def at(self, size: int) -> SizeRows:
        return next(s for s in self.sizes if s.size == size)

    @property
    def measured(self) -> list[SizeRows]:
        return [s for s in self.sizes if s.error is None]

    def groups(self, *, stable_only: bool = False) -> list[list[int]]:
        """Sizes grouped by identical result (first position), in order of first appearance."""
        groups: dict[str, list[int]] = {}
        for s in self.measured:
            if s.key is not None and (s.stable or not stable_only):
                groups.setdefault(s.key, []).append(s.size)
        return list(groups.values())

    @property
    def position_matters(self) -> list[int]:
        return [s.size for s in self.measured if not s.positions_agree]

    @property
    def neighbours_matter(self) -> list[int]:
        return [s.size for s in self.measured if not s.neighbours_agree]

    @property
    def differs(self) -> bool:
        """Some size gave the sample other bits than alone (at some position)."""
        alone = self.at(1).key if any(s.size == 1 for s in self.sizes) else None
        return any(k != alone for s in self.measured for k in s.keys.values())

    def summary(self) -> str:
        """``batch sizes that agree bit for bit: {1} {2,3} {4..32}; position matters at 7``, or
        that the sample's output is identical alone and in every batch measured."""
        sizes = [s.size for s in self.measured]
        if not self.differs:
            return f"a sample's output is identical alone and in batches of {', '.join(map(str, sizes[1:]))}"
        text = f"batch sizes that agree bit for bit: {format_groups(self.groups(), sizes)}"
        if self.position_matters:
            text += f"; position matters at {', '.join(map(str, self.position_matters))}"
        if self.neighbours_matter:
            text += f"; neighbours matter at {', '.join(map(str, self.neighbours_matter))}"
        return text

    @property
    def errors(self) -> list[str]:
        return [f"size {s.size}: {s.error}" for s in self.sizes if s.error]


def format_groups(groups: list[list[int]], all_sizes: list[int]) -> str:
    """``{1} {2,3} {4..32}``: runs of consecutive sizes (in the tried list) written as a range."""
    order = {s: i for i, s in enumerate(all_sizes)}
    parts = []
    for group in groups:
        runs: list[list[int]] = []
        for s in group:
            if runs and order[s] == order[runs[-1][-1]] + 1:
                runs[-1].append(s)
            else:
                runs.append([s])
        text = ",".join(
            str(r[0]) if len(r) == 1 else f"{r[0]},{r[1]}" if len(r) == 2 else f"{r[0]}..{r[-1]}" for r in runs
        )
        parts.append("{" + text + "}")
    return " ".join(parts)


def positions(size: int) -> list[int]:
    """First, middle and last: more positions in one forward cost no more forwards."""
    return sorted({0, size // 2, size - 1})


def measure_batch_invariance(
    forward: Callable[[ModelInputs], Any],
    sample: ModelInputs,
    sizes: list[int],
    *,
    seed: int = 0,
    dim: int = 0,
    neighbours_at: set[int] | None = None,
    budget: float | None = None,
    memory_mb: float | None = None,
    device: str = "cpu",
    progress: Callable[[str], None] = lambda message: None,
) -> BatchInvariance:
    """Measure ``forward`` on ``sample`` (a batch of one) at each of ``sizes``.

    Size 1 is the sample alone. Every other size runs one batch holding the sample at the first,
    middle and last position between random neighbours, and (at the sizes in ``neighbours_at``;
    all when ``None``) one more with other neighbours. A forward that raises marks its size with
    the error; outputs whose rows cannot be split raise :class:`~samebits.tensors.tree.RowError`.
    Sizes go in increasing order until a budget says stop: ``budget`` seconds (a size whose time,
    estimated from the last one's per row, would end past it is not started) and ``memory_mb``
    (a size whose forwards grew the memory peak past it is marked failed, and none larger tried).
    """
    start = time.monotonic()
    gen = torch.Generator().manual_seed(seed)
    results: list[SizeRows] = []
    not_tried: list[int] = []
    stopped: str | None = None
    baseline = device_mb(device) if memory_mb is not None else 0.0  # what memory the whole calibration grew
    for size in sorted(set(sizes)):
        last = results[-1] if results else None
        if stopped is None and budget is not None and last is not None:
            estimate = last.seconds * size / last.size
            if time.monotonic() - start + estimate > budget:
                stopped = f"size {size} would take about {estimate:.1f} s more, past the {budget:g} s budget"
        if stopped is None and memory_mb is not None and last is not None and last.peak_mb is not None:
            grown = last.peak_mb * size / last.size  # activations grow with the rows
            if grown > memory_mb:
                stopped = f"size {size} would grow memory to about {grown:.0f} MB, past the {memory_mb:g} MB budget"
        if stopped is not None:
            not_tried.append(size)
            continue
        progress(f"batch size {size}")
        began = time.monotonic()
        entry = SizeRows(size)
        fresh = neighbours_at is None or size in neighbours_at
        try:
            if memory_mb is None:
                _measure_size(entry, forward, sample, gen, dim, fresh)
            else:
                run = lambda: _measure_size(entry, forward, sample, gen, dim, fresh)  # noqa: E731
                entry.peak_mb = round(peak_of(run, device, since=baseline), 1)
        except Exception as exc:
            from samebits.tensors.tree import RowError

            if isinstance(exc, RowError):
                raise
            entry.error = first_line(exc, with_type=True)
        if memory_mb is not None and entry.peak_mb is not None and entry.peak_mb > memory_mb:
            entry.error = f"its forwards grew memory by {entry.peak_mb:g} MB, over the {memory_mb:g} MB budget"
            stopped = f"size {size} grew memory past the {memory_mb:g} MB budget"
        entry.seconds = round(time.monotonic() - began, 3)
        results.append(entry)
    return BatchInvariance(results, not_tried, round(time.monotonic() - start, 3), stopped)


def _measure_size(
    entry: SizeRows,
    forward: Callable[[ModelInputs], Any],
    sample: ModelInputs,
    gen: torch.Generator,
    dim: int,
    fresh: bool,
) -> None:
    size = entry.size
    if size == 1:
        entry.rows[0] = output_rows(forward(sample), 0, 1, 1, dim=dim)
        entry.keys[0] = row_key(entry.rows[0])
        return
    places = positions(size)
    parts = [sample if i in places else random_neighbour(sample, gen, dim) for i in range(size)]
    out = forward(concat_batches(parts, dim))
    for p in places:
        entry.rows[p] = output_rows(out, p, p + 1, size, dim=dim)
        entry.keys[p] = row_key(entry.rows[p])
    if fresh:
        others = [sample, *[random_neighbour(sample, gen, dim) for _ in range(size - 1)]]
        entry.fresh_key = row_key(output_rows(forward(concat_batches(others, dim)), 0, 1, size, dim=dim))


COUPLING_SIZES = (2, 3, 5)


def coupled_rows(
    forward: Callable[[ModelInputs], Any], sample: ModelInputs, *, seed: int = 0, dim: int = 0
) -> str | None:
    """Why the rows of a batch are coupled by design, or ``None``: an output whose row has a dim
    that follows the batch size (CLIP's ``logits_per_image`` row is ``[1, B]``: each image scored
    against every text of the batch). Measured at batches of 2, 3 and 5 (the sample first,
    random neighbours after); such a model cannot be cut into batches without changing what its
    outputs mean."""
    gen = torch.Generator().manual_seed(seed)
    shapes: dict[int, dict[str, tuple[int, ...]]] = {}
    for n in COUPLING_SIZES:
        batch = concat_batches([sample, *[random_neighbour(sample, gen, dim) for _ in range(n - 1)]], dim)
        try:
            row = output_rows(forward(batch), 0, 1, n, dim=dim)
        except Exception:  # outputs that cannot be split, or a forward that fails here: not this question
            return None
        shapes[n] = {p: tuple(t.shape) for p, t in flatten(row).items() if isinstance(t, torch.Tensor)}
    first = shapes[COUPLING_SIZES[0]]
    for path, shape in first.items():
        for d in range(len(shape)):
            if all(
                path in shapes[n] and len(shapes[n][path]) == len(shape) and shapes[n][path][d] == n for n in shapes
            ):
                seen = ", ".join(f"{list(shapes[n][path])} at batch {n}" for n in COUPLING_SIZES)
                return f"output {path or '<output>'} has a dim of the batch's size ({seen}): each row is computed against the whole batch"
    return None
