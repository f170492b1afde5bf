"""The threads axis in this process: the same forward at each thread count through
``torch.set_num_threads``, where that governs every pool the forward uses (measure/threads.py);
elsewhere the axis runs in fresh interpreters (axes/children.py)."""

from __future__ import annotations

import time
from typing import Any

from samebits.checker.axes.in_process import verdict_of
from samebits.checker.context import CheckContext, keys_for, origin_from
from samebits.checker.report import AxisResult, ChildRun, ChildrenDetails, Origin
from samebits.determinism.rng import seed_rngs
from samebits.measure.ops import first_op_difference, op_digests
from samebits.measure.threads import num_threads
from samebits.measure.trace import first_divergence


def thread_label(n: int) -> str:
    return f"{n} thread{'s' if n > 1 else ''}"


def threads_summary(result: AxisResult) -> str:
    assert isinstance(result.details, ChildrenDetails)
    counts = ", ".join(c.label for c in result.details.children)
    return f"{result.agreed}/{result.runs} thread counts ({counts}) agree"


def skipped_single(counts: tuple[int, ...]) -> AxisResult:
    return AxisResult("threads", "skipped", reason=f"only one thread count to try ({counts[0]}); pass --threads 1,2")


def threads_axis(ctx: CheckContext) -> AxisResult:
    """One forward at each thread count, the global seed set before each."""
    start = time.monotonic()
    counts = ctx.options.thread_counts()
    if len(counts) < 2:
        return skipped_single(counts)
    outputs, traces, runs = [], [], []
    for n in counts:
        began = time.monotonic()
        with num_threads(n):
            seed_rngs(ctx.options.seed)
            out, trace = ctx.forward()
        outputs.append(out)
        traces.append(trace)
        runs.append(ChildRun(thread_label(n), None, round(time.monotonic() - began, 2)))
    verdict, agreed, diff, bad = verdict_of(ctx, outputs, traces)
    result = AxisResult("threads", verdict, len(counts), agreed, difference=diff)
    result.details = ChildrenDetails(runs, in_process=True)
    if bad is not None:
        result.details.pair = [runs[0].label, runs[bad].label]
        if ctx.localizes:
            result.origin = _localize(ctx, (counts[0], counts[bad]))
    result.summary = threads_summary(result)
    result.seconds = time.monotonic() - start
    return result


def _at(ctx: CheckContext, n: int, keep: set[str] | None = None) -> Any:
    with num_threads(n):
        seed_rngs(ctx.options.seed)
        return ctx.traced(keep=keep)


def _localize(ctx: CheckContext, pair: tuple[int, int]) -> Origin | None:
    """Traces at the two thread counts that differ, then their tensors and ops where they start."""
    divergence = first_divergence(_at(ctx, pair[0])[1], _at(ctx, pair[1])[1])
    if divergence is None:
        return None
    keep = keys_for(divergence)
    kept = [_at(ctx, n, keep)[2] for n in pair]
    origin = origin_from(divergence, kept[0], kept[1], ctx.compare_flat)
    if origin is not None:
        ops = []
        for n in pair:
            with num_threads(n):
                seed_rngs(ctx.options.seed)
                ops.append(op_digests(ctx.model, ctx.inputs, divergence.call.name, divergence.call.call))
        origin.op = first_op_difference(ops[0], ops[1])
    return origin
