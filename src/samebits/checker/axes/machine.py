"""The machine axis: the model in fresh processes that run other CPUs' code paths (this CPU's
instruction sets capped to each x86-64 baseline below it, determinism/portable.py), and where
they differ, what the portable level that removes the difference costs on this model."""

from __future__ import annotations

import statistics

from samebits.checker.report import AxisResult, ChildrenDetails, PortableCost
from samebits.determinism.portable import CODE_PATH_VARS, DEFAULT_LEVEL, LEVELS, cpu_flags, machines
from samebits.measure.processes import ChildJob, ChildRunner

COST_ROUNDS = 2  # each a native and a pinned process, one after the other


def machine_jobs(under: str | None, runtime: str | None = None) -> tuple[list[ChildJob], AxisResult | None]:
    """One child per simulated CPU (under portable level ``under``: those that can run it, each
    running it), one fixed hash seed for all; or the axis skipped, and why (a ``runtime`` whose
    kernels the simulation cannot reach would agree everywhere here and not on other CPUs)."""
    unreachable = _unsimulated(runtime, under)
    if unreachable:
        return [], AxisResult("machine", "skipped", reason=unreachable)
    sims = machines(under, cpu_flags())
    if len(sims) < 2:
        reason = "no x86-64 baseline below this CPU to run (the machine axis simulates x86-64 CPUs)"
        return [], AxisResult("machine", "skipped", reason=reason)
    return [ChildJob(label, {"PYTHONHASHSEED": "0", **env}) for label, env in sims], None


def _unsimulated(runtime: str | None, under: str | None) -> str | None:
    from samebits.runtime.backends import REGISTRY

    name = (runtime or "").partition(":")[2] or "eager"
    if name == "auto" and under is None:
        return "backend auto may choose onnxruntime, whose CPU kernels pick their instruction sets themselves: name a backend, or check under --portable (which leaves it out)"
    backend = REGISTRY.get(name)
    if backend is not None and not backend.portable_cpu:
        return f"the {name} backend's CPU kernels pick their instruction sets themselves: capping them to simulate another CPU is not possible"
    return None


def portable_cost(runner: ChildRunner) -> PortableCost | None:
    """Forward seconds of this CPU natively and under the default level, in fresh processes run
    one after the other (never side by side), alternating; ``None`` where a child failed."""
    native = {k: "" for k in CODE_PATH_VARS}
    pinned = {**native, **LEVELS[DEFAULT_LEVEL].env}
    jobs = [
        ChildJob(name, {"PYTHONHASHSEED": "0", **env}, task="time", params={"rounds": 7})
        for _ in range(COST_ROUNDS)
        for name, env in (("native", native), (DEFAULT_LEVEL, pinned))
    ]
    done = runner.run(jobs, parallel=1)
    seconds: dict[str, list[float]] = {"native": [], DEFAULT_LEVEL: []}
    for r in done:
        if r.data is None:
            return None
        seconds[r.label] += r.data["seconds"]
    a, b = statistics.median(seconds["native"]), statistics.median(seconds[DEFAULT_LEVEL])
    return PortableCost(DEFAULT_LEVEL, round(a * 1e3, 3), round(b * 1e3, 3), round(b / a, 3))


def machine_summary(result: AxisResult) -> str:
    assert isinstance(result.details, ChildrenDetails)
    labels = ", ".join(c.label for c in result.details.children)
    return f"{result.agreed}/{result.runs} simulated CPUs agree ({labels})"
