"""Axes that need fresh interpreters: process (hash seeds) and threads."""

from __future__ import annotations

import random
import time

from samebits.checker.context import CheckContext, keys_for, origin_from
from samebits.tensors.compare import worst_verdict
from samebits.checker.report import AxisResult, ChildRun, ChildrenDetails, Difference, Rerun
from samebits.runtime.child import ENTRY as RUNTIME_ENTRY
from samebits.measure.child import OUTPUT_KEY
from samebits.measure.ops import first_op_difference
from samebits.measure.processes import ChildJob, ChildResult, ChildRunner
from samebits.measure.trace import first_divergence


def process_jobs(ctx: CheckContext) -> list[ChildJob]:
    """K children, each with a distinct random PYTHONHASHSEED, as production processes get."""
    seeds = random.SystemRandom().sample(range(1, 2**32 - 1), ctx.options.processes)
    return [ChildJob(f"PYTHONHASHSEED={s}", {"PYTHONHASHSEED": str(s)}) for s in seeds]


def thread_jobs(ctx: CheckContext) -> list[ChildJob]:
    """One child per thread count, OMP/MKL set before start; one fixed hash seed for all."""
    return [
        ChildJob(
            f"{n} thread{'s' if n > 1 else ''}",
            {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n)},
            threads=n,
        )
        for n in ctx.options.thread_counts()
    ]


Pair = tuple[ChildResult, ChildResult]


def _compare_children(ctx: CheckContext, axis: str, results: list[ChildResult]) -> tuple[AxisResult, Pair | None]:
    """Compare every child with the first; also return the first pair that differs."""
    errors = [r for r in results if r.error]
    good = [r for r in results if r.trace is not None]
    if errors and len(good) < 2:
        return AxisResult(axis, "error", len(results), reason="; ".join(f"{r.label}: {r.error}" for r in errors)), None
    ref = good[0]
    agreed, verdict, worst, bad = 1, "identical", None, None
    for other in good[1:]:
        if other.trace.outputs == ref.trace.outputs:  # type: ignore[union-attr]
            agreed += 1
            continue
        result = ctx.compare_flat(
            ref.kept.get(OUTPUT_KEY, {}), other.kept.get(OUTPUT_KEY, {})
        )  # already {path: tensor}
        if result.identical and other.trace.outputs != ref.trace.outputs:  # type: ignore[union-attr]
            verdict = "diverged"  # a non-tensor leaf differs (only digests came back for it)
        elif result.identical:
            agreed += 1
            continue
        bad = bad or other
        if worst is None or result.verdict == "diverged":
            worst = Difference.from_comparison(result)
        verdict = worst_verdict((verdict, result.verdict))
    out = AxisResult(axis, verdict, len(results), agreed, difference=worst)
    details = ChildrenDetails([ChildRun(r.label, r.error, round(r.seconds, 2)) for r in results])
    out.details = details
    if errors:
        out.reason = "; ".join(f"{r.label}: {r.error}" for r in errors)
    if bad is None:
        return out, None
    details.pair = [ref.label, bad.label]
    if ctx.hookable and ctx.options.localize:
        out.origin = origin_from(first_divergence(ref.trace, bad.trace))  # type: ignore[arg-type]
    return out, (ref, bad)


def _with_growth(ctx: CheckContext, runner: ChildRunner, result: AxisResult, pair: Pair, jobs: list[ChildJob]) -> None:
    """Second pass: re-run the two children that differed, keeping the tensors along the way."""
    divergence = first_divergence(pair[0].trace, pair[1].trace)  # type: ignore[arg-type]
    if divergence is None or not ctx.hookable or not ctx.options.localize:
        return
    by_label = {j.label: j for j in jobs}
    keep = sorted(keys_for(divergence))
    ops = (divergence.call.name, divergence.call.call)
    again = runner.run(
        [ChildJob(j.label, j.env, j.threads, keep, ops) for j in (by_label[pair[0].label], by_label[pair[1].label])]
    )
    if all(r.trace is not None for r in again):
        result.origin = origin_from(divergence, again[0].kept, again[1].kept, ctx.compare_flat)
        if result.origin is not None:
            result.origin.op = first_op_difference(again[0].ops, again[1].ops)


def run_children_axes(ctx: CheckContext, names: list[str]) -> dict[str, AxisResult]:
    """Run the process and threads axes (those in ``names``) with all their children at once."""
    start = time.monotonic()
    results: dict[str, AxisResult] = {}
    model = getattr(ctx.model, "predictor", None)
    with ChildRunner(
        model.model if model else ctx.model,
        ctx.inputs,
        spec=ctx.spec,
        seed=ctx.options.seed,
        device=ctx.options.device,
        dtype=ctx.options.dtype,
        timeout=ctx.options.timeout,
        runtime=ctx.options.runtime,
        entry=RUNTIME_ENTRY if ctx.options.runtime else "samebits.measure.child",
    ) as runner:
        if runner.skip_reason:
            hint = "; pass a MODEL spec (file.py:factory) so that fresh processes can load it"
            return {n: AxisResult(n, "skipped", reason=runner.skip_reason + hint) for n in names}
        plan: dict[str, list[ChildJob]] = {}
        if "process" in names:
            plan["process"] = process_jobs(ctx)
        if "threads" in names:
            jobs = thread_jobs(ctx)
            if len(jobs) < 2:
                results["threads"] = AxisResult(
                    "threads", "skipped", reason=f"only one thread count to try ({jobs[0].threads}); pass --threads 1,2"
                )
            else:
                plan["threads"] = jobs
        ctx.progress(f"starting {sum(len(j) for j in plan.values())} fresh processes")
        flat = [job for jobs in plan.values() for job in jobs]
        done = runner.run(flat)
        offset = 0
        for name, jobs in plan.items():
            part = done[offset : offset + len(jobs)]
            offset += len(jobs)
            results[name], pair = _compare_children(ctx, name, part)
            if name == "process" and pair is not None:
                ctx.progress("re-running the processes with one fixed PYTHONHASHSEED")
                fixed = runner.run(
                    [ChildJob(f"PYTHONHASHSEED=0 #{i}", {"PYTHONHASHSEED": "0"}) for i in range(len(jobs))]
                )
                again, _ = _compare_children(ctx, name, fixed)
                assert isinstance(results[name].details, ChildrenDetails)
                results[name].details.fixed_hash_seed = Rerun(again.verdict, again.agreed, again.runs)
            if pair is not None:
                ctx.progress(f"{name}: a second pass that keeps the tensors")
                _with_growth(ctx, runner, results[name], pair, jobs)
            results[name].summary = _summary(name, results[name])
    for r in results.values():
        r.seconds = time.monotonic() - start
    return results


def _summary(name: str, result: AxisResult) -> str:
    if result.verdict in ("error", "skipped"):
        return result.reason
    if name == "process":
        return f"{result.agreed}/{result.runs} processes with different PYTHONHASHSEED agree"
    assert isinstance(result.details, ChildrenDetails)
    counts = ", ".join(c.label for c in result.details.children)
    return f"{result.agreed}/{result.runs} thread counts ({counts}) agree"
