"""The machine axis: the model in fresh processes that run other CPUs' code paths (this CPU's
instruction sets capped to each x86-64 baseline below it, determinism/portable.py), and where
they differ, what the portable level that removes the difference costs on this model."""

from __future__ import annotations

import statistics

from samebits.checker.report import AxisResult, ChildrenDetails, PortableCost
from samebits.determinism.portable import CODE_PATH_VARS, DEFAULT_LEVEL, LEVELS, cpu_flags, cpu_vendor, machines
from samebits.measure.code_paths import unreached
from samebits.measure.processes import ChildJob, ChildResult, ChildRunner

COST_ROUNDS = 2  # each a native and a pinned process, one after the other


PROBE = "probe: "  # the label prefix of a simulated CPU's probe (its variables alone, no level)
UNPROBED = "no probe"  # set aside because its probe (or this CPU's) failed, not for a library it missed


def machine_jobs(under: str | None, runtime: str | None = None) -> tuple[list[ChildJob], AxisResult | None]:
    """One child per simulated CPU (under portable level ``under``: those that can run it, each
    running it), one fixed hash seed for all, then one probe per simulated CPU without the level
    (what its variables reach here: measure/code_paths.py); or the axis skipped, and why (a
    ``runtime`` whose kernels the simulation cannot reach would agree everywhere here and not on
    other CPUs)."""
    unreachable = _unsimulated(runtime, under)
    if unreachable:
        return [], AxisResult("machine", "skipped", reason=unreachable)
    sims = machines(under, cpu_flags())
    if len(sims) < 2:
        reason = "no x86-64 baseline below this CPU to run (the machine axis simulates x86-64 CPUs)"
        return [], AxisResult("machine", "skipped", reason=reason)
    probes = [
        ChildJob(PROBE + label, {"PYTHONHASHSEED": "0", **env}, task="probe")
        for label, env in machines(None, cpu_flags())
    ]
    traces = [ChildJob(label, {"PYTHONHASHSEED": "0", **env}, parents_weights=True) for label, env in sims]
    return traces + probes, None


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


def set_aside_unsimulated(
    results: list[ChildResult], used: list[str]
) -> tuple[list[ChildResult], dict[str, list[str]]]:
    """The machine axis's children less the simulated CPUs that were not simulated: their
    variables changed no probe of a library the model runs (``used``) and their outputs agree
    with this CPU's, so their agreement proves nothing. A CPU whose outputs differ stays (the
    difference is real). Also: each CPU set aside, with the libraries its variables missed."""
    probes = {r.label[len(PROBE) :]: r.data for r in results if r.label.startswith(PROBE)}
    failed = {r.label[len(PROBE) :]: r.error for r in results if r.label.startswith(PROBE) and r.error}
    traces = [r for r in results if not r.label.startswith(PROBE)]
    if not probes or not traces or traces[0].trace is None:
        return traces, {}
    native = probes.get(traces[0].label.split(" under ")[0])
    kept, aside = [traces[0]], {}
    for r in traces[1:]:
        label = r.label.split(" under ")[0]
        probe = probes.get(label)
        if native is not None and probe is not None:
            missed = unreached(native, probe, used)
        else:  # a probe failed: whether this CPU was simulated is unknown, so its agreement proves nothing
            why = failed.get(label) or next(iter(failed.values()), "no answer")
            missed = [f"{UNPROBED} ({why})"] if label in probes or native is None else []
        if missed and r.trace is not None and r.trace.outputs == traces[0].trace.outputs:
            aside[r.label] = missed
        else:
            kept.append(r)
    return kept, aside


def _why_unreached(library: str) -> str:
    if library == "MKL":
        vendor = cpu_vendor()
        if vendor != "GenuineIntel":  # measured on AMD EPYC: MKL_ENABLE_INSTRUCTIONS is ignored there
            return f"MKL caps its instruction sets only on Intel CPUs, and this one is {vendor or 'of another vendor'}"
    return f"{library}'s instruction-set cap changed nothing here"


def unsimulated_text(aside: dict[str, list[str]]) -> str:
    """``could not simulate an x86-64-v3 CPU or an x86-64-v2 CPU: the model runs MKL, which caps
    its instruction sets only on Intel CPUs`` for the CPUs set aside."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for label, libs in aside.items():
        groups.setdefault(tuple(libs), []).append(label)
    parts = [
        f"{' or '.join(labels)}: the probe of what its variables reach failed here: {libs[0][len(UNPROBED) + 2 : -1]}"
        if libs[0].startswith(UNPROBED)
        else f"{' or '.join(labels)}: the model runs {' and '.join(libs)} ({'; '.join(map(_why_unreached, libs))})"
        for libs, labels in groups.items()
    ]
    return "could not simulate " + "; nor ".join(parts)


def machine_summary(result: AxisResult) -> str:
    assert isinstance(result.details, ChildrenDetails)
    details = result.details
    labels = ", ".join(c.label for c in details.children if c.label not in details.unsimulated)
    text = f"{result.agreed}/{result.runs} simulated CPUs agree ({labels})"
    return f"{text}; {unsimulated_text(details.unsimulated)}" if details.unsimulated else text
