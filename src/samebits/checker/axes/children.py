"""Axes that need fresh interpreters: process (hash seeds), machine (other CPUs' code paths),
and threads where it cannot run in this process (measure/threads.py)."""

from __future__ import annotations

import dataclasses
import random
import time

from samebits.checker.axes.machine import (
    PROBE,
    machine_jobs,
    machine_summary,
    portable_cost,
    set_aside_unsimulated,
    unsimulated_text,
)
from samebits.checker.axes.threads import skipped_single, thread_label, threads_summary
from samebits.checker.context import CheckContext, keys_for, origin_from
from samebits.tensors.compare import Verdict, worst_verdict
from samebits.checker.report import AxisResult, ChildRun, ChildrenDetails, Difference, Rerun
from samebits.measure.tasks import OUTPUT_KEY
from samebits.measure.code_paths import libraries_used
from samebits.measure.ops import first_op_difference
from samebits.determinism.portable import DEFAULT_LEVEL, active_level
from samebits.errors import first_line
from samebits.measure.processes import ChildJob, ChildResult, ChildRunner, Pending
from samebits.measure.trace import first_divergence


def process_jobs(ctx: CheckContext) -> list[ChildJob]:
    """K children, each with a distinct random PYTHONHASHSEED, as production processes get."""
    seeds = random.SystemRandom().sample(range(1, 2**32 - 1), ctx.options.processes)
    return [ChildJob(f"PYTHONHASHSEED={s}", {"PYTHONHASHSEED": str(s)}) for s in seeds]


def thread_jobs(ctx: CheckContext) -> list[ChildJob]:
    """One child per thread count, OMP/MKL set before start; one fixed hash seed for all."""
    return [
        ChildJob(
            thread_label(n), {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n)}, threads=n
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
    agreed, bad = 1, None
    verdict: Verdict = "identical"
    worst: Difference | None = None
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
    details.weights_differ = _weights_differ(good)
    out.details = details
    if errors:
        out.reason = "; ".join(f"{r.label}: {r.error}" for r in errors)
    if bad is None:
        return out, None
    details.pair = [ref.label, bad.label]
    return out, (ref, bad)


def _weights_differ(results: list[ChildResult]) -> dict[str, list[str]]:
    """Each child whose factory built other weights than the first child's: the tensors that differ."""
    ref = results[0].weights if results else None
    if not ref:
        return {}
    out = {}
    for r in results[1:]:
        if r.weights is not None and r.weights != ref:
            out[r.label] = [n for n in ref if r.weights.get(n) != ref[n]] + [n for n in r.weights if n not in ref]
    return out


def _localize(ctx: CheckContext, runner: ChildRunner, result: AxisResult, pair: Pair, jobs: list[ChildJob]) -> None:
    """The two children that differed, again: first with hooks (where the difference starts),
    then keeping the tensors and ops there."""
    if not ctx.localizes:
        return
    by_label = {j.label: j for j in jobs}
    first = [by_label[pair[0].label], by_label[pair[1].label]]
    hooked = runner.run([dataclasses.replace(j, hooks=True) for j in first])
    if any(r.trace is None for r in hooked):
        return
    divergence = first_divergence(hooked[0].trace, hooked[1].trace)  # type: ignore[arg-type]
    if divergence is None:
        return
    result.origin = origin_from(divergence)
    keep = sorted(keys_for(divergence))
    ops = (divergence.call.name, divergence.call.call)
    again = runner.run([dataclasses.replace(j, keep=keep, ops=ops) for j in first])
    if all(r.trace is not None for r in again):
        result.origin = origin_from(divergence, again[0].kept, again[1].kept, ctx.compare_flat)
        if result.origin is not None:
            result.origin.op = first_op_difference(again[0].ops, again[1].ops)


class ChildAxes:
    """The axes that need fresh interpreters (``process``, ``machine``, and ``threads`` where it
    cannot run in this process), started by :meth:`start` before the in-process axes and finished after them,
    so that the children import torch and load the model meanwhile."""

    def __init__(self, ctx: CheckContext, names: list[str]) -> None:
        self.ctx, self.names = ctx, names
        self.results: dict[str, AxisResult] = {}
        self.plan: dict[str, list[ChildJob]] = {}
        self.runner: ChildRunner | None = None
        self.pending: Pending | None = None
        self.started = time.monotonic()

    def __enter__(self) -> ChildAxes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pending is not None and self.runner is not None:
            self.runner.kill(self.pending)
        if self.runner is not None:
            self.runner.close()

    def start(self) -> None:
        ctx = self.ctx
        try:
            self.runner = ChildRunner(
                ctx.module,  # the model itself: a child wraps it in its own Predictor (--runtime)
                ctx.inputs,
                spec=ctx.spec,
                seed=ctx.options.seed,
                device=ctx.options.device,
                dtype=ctx.options.dtype,
                timeout=ctx.options.timeout,
                runtime=ctx.options.runtime,
                max_batch_size=ctx.options.max_batch_size,
                batch_invariant=ctx.options.batch_invariant,
            )
            if self.runner.skip_reason:
                hint = "; pass a MODEL spec (file.py:factory) so that fresh processes can load it"
                self.results = {n: AxisResult(n, "skipped", reason=self.runner.skip_reason + hint) for n in self.names}
                return
            if "process" in self.names:
                self.plan["process"] = process_jobs(ctx)
            if "threads" in self.names:
                jobs = thread_jobs(ctx)
                if len(jobs) < 2:
                    self.results["threads"] = skipped_single(ctx.options.thread_counts())
                else:
                    self.plan["threads"] = jobs
            if "machine" in self.names:
                jobs, skipped = machine_jobs(active_level(), ctx.options.runtime)
                if skipped is not None:
                    self.results["machine"] = skipped
                else:
                    self.plan["machine"] = jobs
            ctx.progress(f"starting {sum(len(j) for j in self.plan.values())} fresh processes")
            self.pending = self.runner.submit([job for jobs in self.plan.values() for job in jobs])
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        reason = first_line(exc, with_type=True)
        self.results.update({n: AxisResult(n, "error", reason=reason) for n in self.names if n not in self.results})

    def finish(self) -> dict[str, AxisResult]:
        """Wait for the children, compare them, localise a difference; the axes' results."""
        if self.pending is not None and self.runner is not None:
            self.ctx.progress("axes " + " and ".join(self.plan) + ": waiting for the fresh processes")
            try:
                self._compare(self.runner, self.runner.collect(self.pending))
            except Exception as exc:
                self._failed(exc)
            self.pending = None
        for r in self.results.values():
            r.seconds = time.monotonic() - self.started
        return self.results

    def _compare(self, runner: ChildRunner, done: list[ChildResult]) -> None:
        ctx, offset = self.ctx, 0
        for name, jobs in self.plan.items():
            part = done[offset : offset + len(jobs)]
            offset += len(jobs)
            aside: dict[str, list[str]] = {}
            if name == "machine":
                used, probes = libraries_used(ctx.module, ctx.inputs), [r for r in part if r.label.startswith(PROBE)]
                part, aside = set_aside_unsimulated(part, used)
                if len(part) < 2:
                    reason = f"{unsimulated_text(aside)}: no other CPU's code paths could be run here"
                    self.results[name] = AxisResult(name, "skipped", len(part), reason=reason)
                    continue
            self.results[name], pair = _compare_children(ctx, name, part)
            if aside and isinstance(self.results[name].details, ChildrenDetails):
                self.results[name].details.unsimulated = aside  # type: ignore[union-attr]
            if name == "process" and pair is not None:
                ctx.progress("re-running the processes with one fixed PYTHONHASHSEED")
                fixed = runner.run(
                    [ChildJob(f"PYTHONHASHSEED=0 #{i}", {"PYTHONHASHSEED": "0"}) for i in range(len(jobs))]
                )
                again, _ = _compare_children(ctx, name, fixed)
                details = self.results[name].details
                assert isinstance(details, ChildrenDetails)
                details.fixed_hash_seed = Rerun(again.verdict, again.agreed, again.runs)
            if name == "machine":
                details = self.results[name].details
                if isinstance(details, ChildrenDetails):
                    details.portable = active_level()
                    pinned_jobs, cannot = machine_jobs(DEFAULT_LEVEL, ctx.options.runtime) if pair else ([], None)
                    if pair is not None and details.portable is None:
                        ctx.progress(f"machine: every CPU again under {DEFAULT_LEVEL}, and what it costs")
                        traces = [j for j in pinned_jobs if j.task != "probe"]  # the probes are the same
                        simulated, _ = set_aside_unsimulated(runner.run(traces) + probes, used) if traces else ([], {})
                        if len(simulated) >= 2:  # else no CPU could be simulated under it: not verified
                            again, _ = _compare_children(ctx, name, simulated)
                            details.pinned = Rerun(again.verdict, again.agreed, again.runs)
                        if cannot is None or cannot.reason.startswith("no x86-64 baseline"):
                            details.portable_cost = portable_cost(runner)  # what the level costs here, simulated or not
            if pair is not None:
                ctx.progress(f"{name}: the two processes that differ, again with hooks")
                _localize(ctx, runner, self.results[name], pair, jobs)
            self.results[name].summary = _summary(name, self.results[name])


def _summary(name: str, result: AxisResult) -> str:
    if result.verdict in ("error", "skipped"):
        return result.reason
    if name == "process":
        return f"{result.agreed}/{result.runs} processes with different PYTHONHASHSEED agree"
    if name == "machine":
        return machine_summary(result)
    return threads_summary(result)
