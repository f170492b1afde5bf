"""``backend="auto"``: every installed backend measured on this machine and model at the batch
sizes it verified, and per batch size the fastest among those whose bits equal eager's.

Mixing backends across batch sizes keeps a sample's bits independent of its batch only where
the backends give the same bits: each member's verified sizes form one class (a row has the
same bits at all of them), so one identical comparison at a size two members share makes their
classes one. A backend whose bits differ from eager (``allow_backend_drift=True``) is never
mixed: it runs every size or none."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from samebits.measure.timing import interleaved_times
from samebits.tensors import tree
from samebits.runtime.invariance import bits_against, candidate_sizes

# torch.compile is left out unless asked for: it builds one kernel set per batch shape
# (minutes over nine sizes); TensorRT only where there is a CUDA device.
AUTO_CANDIDATES = ("eager", "torchscript", "export", "onnxruntime")
# what a cached plan must hold to be used
PLAN_KEYS = {"chosen", "backend_by_size", "forward_seconds", "verified", "drift", "skipped", "seconds"}
FASTER = 0.97  # another backend replaces eager at a size only when it takes under 97% of its time


def candidates_for(device: str, asked: tuple[str, ...] | None) -> tuple[str, ...]:
    """The backends ``auto`` measures: ``asked`` (eager always first), else the defaults."""
    names = tuple(asked) if asked else AUTO_CANDIDATES + (("tensorrt",) if device.startswith("cuda") else ())
    return ("eager", *[n for n in names if n != "eager"])


def sizes_of(member: Any) -> list[int]:
    """The batch sizes a member runs: its verified ones, or with invariance off every candidate."""
    if member.invariance.scheme != "off":
        return list(member.invariance.sizes)
    return candidate_sizes(member.max_batch_size)


def drift(eager: Any, member: Any) -> dict[str, Any]:
    """``member`` against eager on the same batch, at the largest size both run (for invariant
    members a size both verified, which makes their classes one when the bits agree)."""
    common = sorted(set(sizes_of(eager)) & set(sizes_of(member)))
    if not common:
        return {"identical": False, "difference": "no batch size verified by both", "batch_size": None}
    size = common[-1]
    batch = eager._example_at(size)
    ours, theirs = tree.move(member._run_at(batch, size), "cpu"), tree.move(eager._run_at(batch, size), "cpu")
    return bits_against(theirs, ours, size)


def time_sizes(members: dict[str, Any], budget: float) -> dict[str, dict[int, float]]:
    """Median seconds of one forward of each member at each size it runs, the members that
    share a size timed interleaved (noise hits them alike); ``budget`` seconds over all sizes."""
    sizes = sorted({s for m in members.values() for s in sizes_of(m)})
    out: dict[str, dict[int, float]] = {name: {} for name in members}
    for size in sizes:
        here = {name: m for name, m in members.items() if size in sizes_of(m)}
        batch = next(iter(here.values()))._example_at(size)
        fns: dict[str, Callable[[], object]] = {name: (lambda m=m: m._run_at(batch, size)) for name, m in here.items()}
        for name, values in interleaved_times(fns, rounds=60, budget=budget / len(sizes)).items():
            out[name][size] = statistics.median(values)
    return out


def choose(
    times: dict[str, dict[int, float]], identical: dict[str, bool], allow_drift: bool
) -> tuple[dict[int, str], dict[int, float]]:
    """(backend by size, seconds by size). Among the backends with eager's bits, per size the
    fastest (eager kept unless another takes under ``FASTER`` of its time); a drifting backend,
    where allowed, replaces that whole plan when it is faster at the sizes both run."""
    same = {b: t for b, t in times.items() if identical.get(b)}
    by_size: dict[int, str] = {}
    for size in sorted({s for t in same.values() for s in t}):
        here = {b: t[size] for b, t in same.items() if size in t}
        best = min(here, key=here.__getitem__)
        keep = "eager" if "eager" in here and here[best] >= FASTER * here["eager"] else best
        by_size[size] = keep
    seconds = {s: same[b][s] for s, b in by_size.items()}
    if allow_drift:
        for backend, t in times.items():
            shared = set(t) & set(seconds)
            if (
                not identical.get(backend)
                and shared
                and sum(t[s] for s in shared) < FASTER * sum(seconds[s] for s in shared)
            ):
                by_size, seconds = {s: backend for s in t}, dict(t)
    return by_size, seconds


def describe(plan: dict[str, Any]) -> str:
    """One line: which backend runs which sizes, and what was left out and why."""
    runs: dict[str, list[int]] = {}
    for size, backend in sorted((int(s), b) for s, b in plan["backend_by_size"].items()):
        runs.setdefault(backend, []).append(size)
    parts = [f"{b} at batch {', '.join(map(str, sizes))}" for b, sizes in runs.items()]
    out = "backend auto (measured here): " + "; ".join(parts)
    left = [
        f"{b} (other bits than eager: {d['difference']}; allow_backend_drift=True allows it)"
        for b, d in plan["drift"].items()
        if not d["identical"] and b not in runs
    ]
    left += [f"{b} ({reason})" for b, reason in plan["skipped"].items()]
    return out + (f"; left out: {', '.join(left)}" if left else "")
