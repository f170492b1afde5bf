"""Wall-clock timing: interleaved rounds within a time budget, the machine's load meanwhile, and
ratios taken round by round with their spread. A ratio is printed as a fact only where it can
be one: its rounds agree on which side of 1 it lies, and the machine was not busy."""

from __future__ import annotations

import types
import dataclasses
import functools
import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from samebits.measure.load import Load, LoadWatch

MAX_ROUNDS = 1000  # what ``least`` may stretch a timing to


@dataclasses.dataclass(frozen=True)
class Spread:
    """Values measured over rounds: their min, median and max, and how many rounds."""

    low: float
    median: float
    high: float
    rounds: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(min(values), statistics.median(values), max(values), len(values))

    def to_dict(self) -> dict[str, float | int]:
        return {"min": self.low, "median": self.median, "max": self.high, "rounds": self.rounds}


@dataclasses.dataclass(frozen=True)
class Ratio(Spread):
    """A ratio taken within each round (so that noise hits both sides alike), and the load."""

    load: Load | None = None

    @classmethod
    def over(cls, values: Sequence[float], load: Load | None) -> Ratio:
        """The ratio of per-round values (each taken within one round)."""
        return cls(min(values), statistics.median(values), max(values), len(values), load)

    @classmethod
    def from_dict(cls, data: Any, load: Load | None = None) -> Ratio | None:
        """A ratio as :meth:`to_dict` wrote it (its own load, else ``load``), or ``None``."""
        try:
            own = Load.from_dict(data["load"]) if data.get("load") else None
            return cls(float(data["min"]), float(data["median"]), float(data["max"]), int(data["rounds"]), own or load)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @property
    def measurable(self) -> bool:
        """Not taken on a busy machine."""
        return self.load is None or not self.load.busy

    @property
    def clear(self) -> bool:
        """Measurable, and every round on the same side of 1."""
        return self.measurable and not (self.low <= 1.0 <= self.high)

    def at_least(self, threshold: float) -> bool:
        """Measurable, and at least ``threshold`` in every round: what a finding may rest on."""
        return self.measurable and self.low >= threshold

    def text(self, unit: str = "x", needs_quiet: bool = True) -> str:
        """``2.3x (2.1-2.6x over 5 rounds)``; ``no clear difference (...)`` where the rounds fall
        on both sides of 1; ``not measurable here (load 3.1 on 2 cores)`` on a busy machine
        (unless ``needs_quiet`` is false: a measurement of what the load itself does)."""
        if needs_quiet and not self.measurable:
            assert self.load is not None
            return f"not measurable here ({self.load.describe()})"
        if self.low <= 1.0 <= self.high:
            return f"no clear difference ({_num(self.low)}-{_num(self.high)}{unit} over {self.rounds} rounds)"
        return self.figures(unit)

    def figures(self, unit: str = "x") -> str:
        """``2.20x (2.00-2.60x over 5 rounds)``: the median and its range, whatever they say."""
        return f"{_num(self.median)}{unit} ({_num(self.low)}-{_num(self.high)}{unit} over {self.rounds} rounds)"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "load": self.load.to_dict() if self.load else None}


def _num(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


@dataclasses.dataclass(frozen=True)
class Timings:
    """Seconds of every round of each function, and the machine's load while they ran."""

    seconds: dict[str, list[float]]
    load: Load

    def __getitem__(self, name: str) -> list[float]:
        return self.seconds[name]

    def median(self, name: str) -> float:
        return statistics.median(self.seconds[name])

    def rate(self, name: str, per_call: float = 1.0) -> Spread:
        """``per_call / seconds`` over the rounds: calls (or samples) per second."""
        return Spread.of([per_call / s for s in self.seconds[name]])

    def ratio(self, slow: str, fast: str, scale: float = 1.0, blocks: int | None = None) -> Ratio:
        """``scale * seconds(slow) / seconds(fast)`` round by round: how many times faster ``fast``
        is. With ``blocks``, the rounds are cut into that many runs of consecutive rounds and the
        ratio is of each run's total: throughput, where rare long stalls are the cost."""
        a, b = self.seconds[slow], self.seconds[fast]
        if blocks is not None and len(a) >= blocks:
            cuts = [len(a) * i // blocks for i in range(blocks + 1)]
            a, b = ([sum(x[i:j]) for i, j in zip(cuts, cuts[1:])] for x in (a, b))
        return Ratio.over([scale * x / y for x, y in zip(a, b)], self.load)


def interleaved_times(
    fns: dict[str, Callable[[], object]], rounds: int = 5, budget: float = 3.0, least: float = 0.0
) -> Timings:
    """Seconds of every call of each function, measured in interleaved rounds (so that machine
    noise hits all of them alike) in a shuffled order, after one warm-up call each; fewer rounds
    when the budget runs out (never fewer than two where ``rounds`` allows: a spread needs two),
    more while under ``least`` seconds (a measurement shorter than a scheduler's time slice does
    not see the machine's other processes)."""
    sync = _device_sync()
    for fn in fns.values():
        fn()
    sync()
    times: dict[str, list[float]] = {name: [] for name in fns}
    order, shuffle = list(fns.items()), random.Random(0).shuffle
    with LoadWatch() as watch:
        start = time.perf_counter()
        for done in itertools.count(1):
            elapsed = time.perf_counter() - start
            if done > rounds and (elapsed >= least or done > MAX_ROUNDS):
                break
            # a new order every round (seeded): a function that runs right after another library's
            # thread pool pays for waking torch's, so no function may always follow the same one
            shuffle(order)
            for name, fn in order:
                t = time.perf_counter()
                fn()
                sync()  # a CUDA call returns when its kernels are queued, not done
                times[name].append(time.perf_counter() - t)
            if done >= 2 and time.perf_counter() - start > budget:
                break
    return Timings(times, watch.load)


def _device_sync() -> Callable[[], object]:
    """A wait for every CUDA device where CUDA runs in this process (what is timed ends when the
    GPUs are done), else nothing: ``torch.cuda.synchronize()`` without a device waits for the
    current device alone, and a model on ``cuda:1`` would be timed when its kernels are queued."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return functools.partial(sync_every_device, torch)
    return lambda: None


def sync_every_device(torch: types.ModuleType) -> None:
    """Wait for the kernels queued on every CUDA device of this process."""
    for index in range(torch.cuda.device_count()):
        torch.cuda.synchronize(index)


def median_seconds(fns: dict[str, Callable[[], object]], rounds: int = 5, budget: float = 3.0) -> dict[str, float]:
    """Median seconds of each function over :func:`interleaved_times` (the bench scripts' tables)."""
    times = interleaved_times(fns, rounds, budget)
    return {name: times.median(name) for name in fns}
