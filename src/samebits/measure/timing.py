"""Wall-clock timing: interleaved rounds within a time budget, and their medians."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable


def interleaved_times(
    fns: dict[str, Callable[[], object]], rounds: int = 5, budget: float = 3.0
) -> dict[str, list[float]]:
    """Seconds of every call of each function, measured in interleaved rounds (so that machine
    noise hits all of them alike) in a shuffled order, after one warm-up call each; fewer rounds
    when the budget runs out."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    order, shuffle = list(fns.items()), random.Random(0).shuffle
    start = time.perf_counter()
    for _ in range(rounds):
        # a new order every round (seeded): a function that runs right after another library's
        # thread pool pays for waking torch's, so no function may always follow the same one
        shuffle(order)
        for name, fn in order:
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
        if time.perf_counter() - start > budget:
            break
    return times


def median_seconds(fns: dict[str, Callable[[], object]], rounds: int = 5, budget: float = 3.0) -> dict[str, float]:
    """Median seconds of each function over :func:`interleaved_times`."""
    return {name: statistics.median(values) for name, values in interleaved_times(fns, rounds, budget).items()}
