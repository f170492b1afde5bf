"""Batch invariance by measurement: which batch sizes give a row the same bits, whatever its
position and neighbours; and the plan that runs a batch only at verified sizes."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any


from samebits.models.inputs import ModelInputs
from samebits.measure.invariance import measure_batch_invariance
from samebits.measure.load import Load
from samebits.measure.timing import Ratio, interleaved_times
from samebits.runtime.cache import ArtifactCache
from samebits.runtime.plan import Difference


@dataclasses.dataclass
class Invariance:
    """What was measured and what was chosen: ``sizes`` are the only batch sizes ever run."""

    scheme: str  # "tile" | "class" | "off"
    sizes: list[int]
    measured: dict[str, Any]
    seconds: float = 0.0

    def plan(self, n: int) -> list[tuple[int, int]]:
        """``[(rows, size), ...]`` covering ``n`` rows: each chunk runs at a verified size.
        Among such plans, the one that the calibration's timings say is fastest (every verified
        size gives the same bits, so this choice is free); without timings, where the gain is
        within noise (< 10%), or where a round of the timed forwards or the machine's load says
        otherwise, chunks of the largest size and the rest padded up."""
        if self.scheme == "off" or not self.sizes:
            return [(n, n)]
        memo = self.__dict__.setdefault("_plans", {})  # not a field: the search runs once per n
        if n not in memo:
            greedy = _greedy(n, self.sizes)
            costs = self.costs()
            best = _cheapest(n, tuple(sorted(costs.items()))) if costs else greedy
            faster = costs and _cost(best, costs) < 0.9 * _cost(greedy, costs) and self._holds(best, greedy)
            plan = best if faster else greedy
            if len(memo) >= 4096:
                memo.clear()
            memo[n] = plan
        return list(memo[n])

    def _holds(self, best: list[tuple[int, int]], greedy: list[tuple[int, int]]) -> bool:
        """Whether ``best`` was cheaper than ``greedy`` in every round of the timed forwards, on
        a machine that was not busy (true where the calibration kept no rounds)."""
        rounds = {int(k): v for k, v in (self.measured.get("forward_rounds") or {}).items()}
        if not rounds or not all(s in rounds for _, s in best + greedy):
            return True
        load = Load.from_dict(self.measured.get("load"))
        count = min(len(rounds[s]) for _, s in best + greedy)
        ratios = [sum(rounds[s][r] for _, s in greedy) / sum(rounds[s][r] for _, s in best) for r in range(count)]
        return Ratio.over(ratios, load).clear and min(ratios) > 1.0

    def costs(self) -> dict[int, float] | None:
        """Seconds the calibration took at each verified size (relative forward costs), or
        ``None`` where it has no timing for one of them."""
        timed = self.timings()
        if not all(s in timed and timed[s] > 0 for s in self.sizes):
            return None
        return {s: timed[s] for s in self.sizes}

    def timings(self) -> dict[int, float]:
        """Seconds of one forward at each size: the timed forwards where they were measured
        (``forward_seconds``), else the calibration's seconds per size (rougher: the first size
        carries the warm-up)."""
        timed = self.measured.get("forward_seconds") or self.measured.get("seconds_by_size") or {}
        return {int(k): float(v) for k, v in timed.items()}

    def notes(self) -> list[str]:
        """What the plan costs where invariance constrains it: a lone sample padded up, a
        largest verified size below what was tried (measured against plain batching)."""
        if self.scheme == "whole":
            return [f"each batch runs whole, as given (never split or padded): {self.measured['coupled']}"]
        out: list[str] = []
        stopped, measured_sizes = self.measured.get("stopped"), self.measured.get("tried") or []
        if stopped and measured_sizes:
            out.append(
                f"calibrated up to batch size {max(measured_sizes)}: {stopped} (max_batch_size caps the sizes tried)"
            )
        if self.sizes == [1] and self.measured.get("neighbours_matter"):
            sizes = ", ".join(map(str, self.measured["neighbours_matter"]))
            out.append(
                f"every row runs alone (one row per forward): at size {sizes} a row's bits changed with its "
                "neighbours (routing, per-batch scales or packed lengths couple the rows), so no batch size keeps them"
            )
        timed = self.timings()
        if self.scheme == "off" or not self.sizes or not timed:
            return out
        low, top, tried = min(self.sizes), max(self.sizes), max(timed)
        if low > 1 and timed.get(1) and timed.get(low):
            out.append(
                f"a single sample runs padded to {low} rows (1 row gives other bits here)"
                + self._measured(low, 1, 1.0, "its time against a 1-row forward")
            )
        if top < tried and timed.get(top) and timed.get(tried):
            out.append(
                f"largest verified batch size {top} (tried up to {tried}): a batch of {tried} runs as {-(-tried // top)} forwards"
                + self._measured(tried, top, top / tried, f"throughput against plain batching at {tried}")
            )
        return out

    def _measured(self, slow: int, fast: int, scale: float, what: str) -> str:
        """``; <what>: 1.3x (1.2-1.5x over 15 rounds)`` from the timed forwards' rounds, where
        the calibration kept them."""
        rounds = self.measured.get("forward_rounds") or {}
        a, b = rounds.get(slow, rounds.get(str(slow))), rounds.get(fast, rounds.get(str(fast)))
        if not a or not b:
            return ""
        ratio = Ratio.over([scale * x / y for x, y in zip(a, b)], Load.from_dict(self.measured.get("load")))
        return f"; {what}: {ratio.text()}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _greedy(n: int, sizes: list[int]) -> list[tuple[int, int]]:
    out, left, top = [], n, max(sizes)
    while left > 0:
        rows = min(left, top)
        out.append((rows, min(s for s in sizes if s >= rows)))
        left -= rows
    return out


def _cost(plan: list[tuple[int, int]], costs: dict[int, float]) -> float:
    return sum(costs[size] for _, size in plan)


def _cheapest(n: int, costs: tuple[tuple[int, float], ...]) -> list[tuple[int, int]]:
    """The plan of least total cost for ``n`` rows: the bulk in chunks of the size cheapest per
    row, the last stretch (under two of those) by dynamic programming over every verified size."""
    table = dict(costs)
    bulk_size = min(table, key=lambda s: (table[s] / s, -s))
    bulk = max(0, n // bulk_size - 1)
    rest = n - bulk * bulk_size
    best: list[float] = [0.0] + [float("inf")] * rest
    choice = [0] * (rest + 1)
    for m in range(1, rest + 1):
        for size, cost in costs:
            c = cost + best[max(0, m - size)]
            if c < best[m]:
                best[m], choice[m] = c, size
    tail, m = [], rest
    while m > 0:
        tail.append((min(m, choice[m]), choice[m]))
        m -= min(m, choice[m])
    return [(bulk_size, bulk_size)] * bulk + sorted(tail, key=lambda c: -c[0])


def candidate_sizes(max_batch_size: int) -> list[int]:
    """The batch sizes a calibration tries: powers of two up to ``max_batch_size``, and it."""
    return sorted({s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256) if s <= max_batch_size} | {max_batch_size})


def bits_against(reference: Any, ours: Any, size: int | None) -> Difference:
    """Whether ``ours`` has the bits of ``reference`` (both on the CPU), and the first difference."""
    from samebits.tensors.compare import compare

    result = compare(reference, ours)
    worst = result.first_difference()
    if worst is None:
        return Difference(result.identical, batch_size=size)
    return Difference(result.identical, worst.max_abs, worst.max_rel, worst.brief(), size)


def time_forwards(forward_at: Callable[[int], Any], sizes: list[int], budget: float) -> dict[str, Any]:
    """One forward at each size timed in interleaved rounds (a warm-up call each first) within
    ``budget`` seconds: ``forward_seconds`` (medians), ``forward_rounds`` (every round) and the
    ``load`` meanwhile, as the calibration stores them."""
    fns: dict[str, Callable[[], object]] = {str(s): functools.partial(forward_at, s) for s in sorted(set(sizes))}
    times = interleaved_times(fns, rounds=15, budget=budget)
    return {
        "forward_seconds": {int(size): times.median(size) for size in fns},
        "forward_rounds": {int(size): times[size] for size in fns},
        "load": times.load.to_dict(),
    }


def calibrate(
    forward: Callable[[ModelInputs], Any],
    sample: ModelInputs,
    candidates: list[int],
    *,
    seed: int = 0,
    budget: float | None = None,
    memory_mb: float | None = None,
    device: str = "cpu",
) -> Invariance:
    """The one batch-invariance measurement (:func:`samebits.measure.invariance.measure_batch_invariance`:
    the sample at the first, middle and last position, and again with other neighbours) at each
    candidate size. A size is *stable* when all its rows agree; stable sizes whose rows agree
    with each other form a class. The largest class (then the one reaching the largest size) is
    chosen. Candidates go in increasing order until ``budget`` seconds or ``memory_mb`` says stop
    (the largest size tried and why it stopped are recorded, and cached with the rest, so every
    process of a deployment runs the sizes the first one measured); sizes whose forward raised, or
    grew memory past the budget, are never used."""
    measured = measure_batch_invariance(
        forward, sample, candidates, seed=seed, budget=budget, memory_mb=memory_mb, device=device
    )
    classes = measured.groups(stable_only=True)
    groups = sorted(classes, key=lambda g: (len(g), max(g)), reverse=True)
    chosen = groups[0] if groups else []
    if measured.neighbours_matter and 1 in [s.size for s in measured.measured]:
        # a row's bits follow its neighbours at some size: sizes that looked stable were so only for
        # the neighbours drawn (routing, per-batch scales, packed lengths): one row per forward
        chosen = [1]
    details = {
        "tried": sorted(s.size for s in measured.sizes),
        "unstable": [s.size for s in measured.measured if not s.stable],
        "classes": [sorted(g) for g in classes],
        "seconds_by_size": {s.size: s.seconds for s in measured.sizes},
        "not_tried": measured.not_tried,
        "errors": measured.errors,
        "failed": [s.size for s in measured.sizes if s.error],
        "stopped": measured.stopped,
        "neighbours_matter": measured.neighbours_matter,
    }
    scheme = "tile" if len(chosen) == 1 else "class"
    return Invariance(scheme, sorted(chosen), details, measured.seconds)


def cached_calibration(
    store: ArtifactCache, key: str, measure: Callable[[], Invariance], what: str | None = None
) -> Invariance:
    """The calibration cached under ``key`` (marked ``cached``), else ``measure()``'s, cached
    where the cache can be written; a corrupt or planted entry is measured again (with a warning)."""
    name = f"calibration-{key}.json"
    data = store.read_json(name)
    if data is not None and {"scheme", "sizes", "measured", "seconds"} <= set(data):
        return Invariance(data["scheme"], data["sizes"], {**data["measured"], "cached": True}, data["seconds"])
    inv = measure()
    if store.writable or not store.is_cache:
        store.build_once(
            name,
            lambda tmp: tmp.write_text(json.dumps(inv.to_dict())),
            kind="calibration",
            what=f"{what}: batch sizes {', '.join(map(str, inv.sizes)) or 'none'} verified" if what else None,
        )
    return inv


def over_budget(inv: Invariance, candidates: list[int], budget: float) -> str | None:
    """What to say when a calibration measured here took longer than its budget (never where it
    measured one size only: it could not have done less, and no smaller max_batch_size helps)."""
    if "cached" in inv.measured or inv.seconds <= budget or len(inv.measured.get("tried") or []) <= 1:
        return None
    costs = inv.measured.get("seconds_by_size") or {}
    top = max((int(k) for k in costs), default=0)
    return (
        f"calibration measured batch sizes up to {max(inv.measured.get('tried') or candidates)} in {inv.seconds:.1f} s, over its {budget:g} s budget "
        f"(size {top} alone took {float(costs.get(top, costs.get(str(top), 0.0))):.2f} s); it is cached now, and a smaller "
        "max_batch_size calibrates faster"
    )
