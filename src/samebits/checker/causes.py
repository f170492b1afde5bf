"""Causes and fixes, each found by a controlled re-run or a direct measurement, never guessed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from samebits.checker.report import (
    AxisResult,
    BatchDetails,
    Cause,
    ChildrenDetails,
    LayoutDetails,
    SeedDetails,
    StateDetails,
)
from samebits.measure.guard import training_modules
from samebits.rules.causes import fix_of
from samebits.models.inputs import Model

T = TypeVar("T")


def _names(items: list[tuple[str, str]], limit: int = 4) -> str:
    text = ", ".join(f"{n} ({t})" for n, t in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _details(result: AxisResult | None, kind: type[T]) -> T | None:
    """An axis's typed details when it has them (a skipped or failed axis has none)."""
    return result.details if result is not None and isinstance(result.details, kind) else None


@dataclasses.dataclass
class Evidence:
    """What the detectors read: the axes' results, the model, the re-run callback, which axes
    diverged and which a detector before has explained."""

    results: dict[str, AxisResult]
    model: Model
    rerun: Callable[[str, str], AxisResult]
    bad: set[str]
    explained: set[str] = dataclasses.field(default_factory=set)
    # a model in training mode: each failing in-process axis measured again with model.eval(), which
    # is what the later detectors read (a kernel cause is named from eval's evidence, not dropout's)
    under_eval: dict[str, AxisResult] = dataclasses.field(default_factory=dict)

    def diverged(self, axis: str) -> AxisResult | None:
        """The axis's result when it diverged (or was only close), else None; under eval where it
        was re-run so."""
        if axis not in self.bad:
            return None
        result = self.under_eval.get(axis, self.results.get(axis))
        return result if result is not None and result.verdict in ("diverged", "close") else None


RERUN_UNDER_EVAL = {"repeat", "seed", "state", "batch", "layout"}  # the in-process axes, threads aside


def training_mode(e: Evidence) -> list[Cause]:
    training = training_modules(e.model)
    in_process = sorted(e.bad & RERUN_UNDER_EVAL)
    if not (training and in_process):
        return []
    e.under_eval = {axis: e.rerun(axis, "eval") for axis in in_process}
    fixed = [axis for axis in in_process if e.under_eval[axis].verdict == "identical"]
    if not fixed:
        return []
    e.explained.update(fixed)
    return [
        Cause(
            "training-mode",
            ", ".join(fixed),
            f"the model is in training mode: {_names(training)}",
            f"with model.eval() the {', '.join(fixed)} {'axes are' if len(fixed) > 1 else 'axis is'} identical",
            fix_of("training-mode"),
            verified=True,
        )
    ]


def state_between_calls(e: Evidence) -> list[Cause]:
    """Outputs change between calls, yet no RNG was drawn: state kept across calls."""
    seed, repeat = e.results.get("seed"), e.results.get("repeat")
    details = _details(seed, SeedDetails)
    if seed is None or (details and details.rngs_consumed):
        return []
    hidden = sorted((e.bad & {"repeat", "seed"}) - e.explained)
    if not hidden:
        return []
    shapes = next(
        (
            a.difference.message
            for a in (repeat, seed)
            if a and a.difference and "shape" in a.difference.message.lower()
        ),
        "",
    )
    e.explained.update(hidden)
    return [
        Cause(
            "state-between-calls",
            ", ".join(hidden),
            "the output changes from call to call although the forward draws no random numbers: the model keeps state between calls (a counter, a cache, an attribute it updates)",
            "no torch, NumPy or Python RNG state changed during the forward"
            + (f"; {shapes.splitlines()[0]}" if shapes else ""),
            fix_of("state-between-calls"),
        )
    ]


def randomness_in_forward(e: Evidence) -> list[Cause]:
    seed = e.diverged("seed")
    if seed is None or "seed" in e.explained:
        return []
    details = _details(seed, SeedDetails)
    rngs = details.rngs_consumed if details else []
    modules = details.modules if details else []
    where = ", ".join(f"{m.module} ({m.type}: {', '.join(m.rngs)})" for m in modules) or "code hooks cannot see"
    axes = ["seed"] + (["repeat"] if rngs and "repeat" in e.bad and "repeat" not in e.explained else [])
    e.explained.update(axes)
    return [
        Cause(
            "randomness-in-forward",
            ", ".join(axes),
            f"the forward draws random numbers ({', '.join(rngs) or 'from an RNG'}) in {where}",
            f"{seed.runs - seed.agreed + 1} of {seed.runs} re-seeded runs differ; the {', '.join(rngs)} RNG state changes during the forward",
            fix_of("randomness-in-forward"),
        )
    ]


def state_mutation(e: Evidence) -> list[Cause]:
    state = e.diverged("state")
    if state is None or "state" in e.explained:
        return []
    details = _details(state, StateDetails)
    mods = [(m.module, m.type) for m in details.modules] if details else []
    e.explained.add("state")
    first = bool(details and details.first_forward_only)
    return [
        Cause(
            "state-mutation",
            "state",
            f"the {'first ' if first else ''}forward changes the model's own tensors in {_names(mods)}",
            f"{len(details.changed) if details else 0} parameters or buffers have other digests after "
            + ("the first forward after loading, and none after later ones" if first else "one forward"),
            fix_of("state-mutation", "first-forward" if first else None),
        )
    ]


def per_process(e: Evidence) -> list[Cause]:
    """hash-order when one PYTHONHASHSEED makes the processes agree, else per-process."""
    process = e.diverged("process")
    if process is None or "process" in e.explained:
        return []
    details = _details(process, ChildrenDetails)
    fixed = details.fixed_hash_seed if details else None
    if fixed is not None and fixed.verdict == "identical":
        return [
            Cause(
                "hash-order",
                "process",
                "the output depends on Python's hash order (a set or dict of strings iterated in the forward)",
                f"processes with different PYTHONHASHSEED differ; with PYTHONHASHSEED=0 all {fixed.runs} agree",
                fix_of("hash-order"),
                verified=True,
            )
        ]
    if "repeat" in e.bad:
        return []
    still = (fixed.runs - fixed.agreed) if fixed else (process.runs - process.agreed)
    return [
        Cause(
            "per-process",
            "process",
            "each process computes other bits, even with one PYTHONHASHSEED",
            f"{still} processes with PYTHONHASHSEED=0 still differ while repeats in one process agree",
            fix_of("per-process"),
        )
    ]


def weights_at_construction(e: Evidence) -> list[Cause]:
    """Fresh processes whose factories built other weights: that, not a forward, is the first
    difference (RWKV's orthogonal init at 1 and 2 threads). Not the machine axis: its children
    run the parent's weights (what a capped CPU's initialisers draw is the simulation's, not a
    real CPU's concern)."""
    out = []
    for axis in ("process", "threads"):
        result = e.diverged(axis)
        details = _details(result, ChildrenDetails)
        if result is None or details is None or not details.weights_differ or axis in e.explained:
            continue
        e.explained.add(axis)
        label, names = next(iter(details.weights_differ.items()))
        shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
        out.append(
            Cause(
                "weights-at-construction",
                axis,
                f"the model's factory builds other weights in the fresh process of {label} than in that of "
                f"{details.children[0].label}",
                f"{len(names)} parameters or buffers differ before any forward ({shown})",
                fix_of("weights-at-construction"),
            )
        )
    return out


def thread_count(e: Evidence) -> list[Cause]:
    threads = e.diverged("threads")
    if threads is None or "threads" in e.explained:
        return []
    details = _details(threads, ChildrenDetails)
    where = f" from {threads.origin.module}" if threads.origin else ""
    runs = "forwards in this process" if details and details.in_process else "fresh processes"
    counts = ", ".join(c.label for c in details.children) if details else "other thread counts"
    return [
        Cause(
            "thread-count",
            "threads",
            f"the output depends on the intra-op thread count{where}",
            f"{runs} with {counts} give other bits",
            fix_of("thread-count"),
        )
    ]


def cpu_code_paths(e: Evidence) -> list[Cause]:
    machine = e.diverged("machine")
    if machine is None or "machine" in e.explained:
        return []
    details = _details(machine, ChildrenDetails)
    where = f" from {machine.origin.module}" if machine.origin else ""
    pair = " and ".join(details.pair) if details and details.pair else "two simulated CPUs"
    if details and details.portable:
        return [
            Cause(
                "cpu-code-paths",
                "machine",
                f"under portable level {details.portable}, CPUs that can run it still compute other bits{where}",
                f"{pair} give other bits",
                fix_of("cpu-code-paths", "escaped"),
            )
        ]
    pinned, cost = (details.pinned, details.portable_cost) if details else (None, None)
    evidence = f"{pair} give other bits"
    if pinned is not None:
        evidence += f"; under {cost.level if cost else 'the portable level'} {pinned.agreed}/{pinned.runs} agree"
    if cost is not None:
        evidence += (
            f"; the level's forward takes {cost.pinned_ms:g} ms against {cost.native_ms:g} ms natively "
            f"({cost.ratio:.2f}x, fresh processes one after another)"
        )
    return [
        Cause(
            "cpu-code-paths",
            "machine",
            f"another CPU computes other bits{where}: MKL, oneDNN and ATen pick kernels by instruction set",
            evidence,
            fix_of("cpu-code-paths"),
            verified=pinned is not None and pinned.verdict == "identical",
        )
    ]


def batch_size(e: Evidence) -> list[Cause]:
    batch = e.diverged("batch")
    if batch is None or e.diverged("repeat") or e.diverged("seed"):
        return []  # forwards that do not repeat (their cause is named) make every batch differ: no batch cause
    details = _details(batch, BatchDetails)
    if details is not None and details.coupled:
        return [
            Cause(
                "rows-coupled",
                "batch",
                f"a sample's output depends on its batch by design: {details.coupled}",
                f"batch sizes that agree bit for bit: {details.groups_text}",
                fix_of("rows-coupled"),
            )
        ]
    where = f", starting in {batch.origin.module} ({batch.origin.type})" if batch.origin else ""
    groups = f"batch sizes that agree bit for bit: {details.groups_text if details else '?'}"
    if details is not None and details.neighbours_matter:
        sizes = ", ".join(map(str, details.neighbours_matter))
        return [
            Cause(
                "neighbours-matter",
                "batch",
                f"a sample's output depends on the other rows of its batch{where}",
                f"at size {sizes}, other neighbours at the same position give the sample other bits"
                + (f" (a row first follows its neighbours at {details.coupling_op})" if details.coupling_op else "")
                + f"; {groups}",
                fix_of("neighbours-matter"),
            )
        ]
    sized = details is None or len(details.groups) > 1
    causes = []
    if details is not None and details.position_matters:
        sizes = ", ".join(map(str, details.position_matters))
        causes.append(
            Cause(
                "position-dependent",
                "batch",
                f"a sample's output depends on its position in the batch{where}",
                f"at size {sizes}, the same neighbours with the sample at another position give it other bits; {groups}",
                fix_of("position-dependent"),
            )
        )
    if sized or not causes:
        causes.append(
            Cause(
                "batch-size",
                "batch",
                f"a sample's output depends on the batch size{where}",
                groups,
                fix_of("batch-size"),
            )
        )
    return causes


def memory_layout(e: Evidence) -> list[Cause]:
    layout = e.diverged("layout")
    details = _details(layout, LayoutDetails)
    if layout is None or details is None:
        return []
    differ = [t for t in details.layouts if t.verdict in ("diverged", "close") and t.counts]
    where = f", starting in {layout.origin.module} ({layout.origin.type})" if layout.origin else ""
    on_parameters = any(t.name.startswith("parameters") for t in differ)
    evidence = "; ".join(f"{t.name}: {t.note}" for t in differ) + f"; the model as given: {details.model_as_given}"
    if details.aligned_fixes is not None:
        evidence += (
            "; samebits.align_parameters on each gives the bits of fresh aligned storage"
            if details.aligned_fixes
            else "; samebits.align_parameters does not give them back"
        )
    return [
        Cause(
            "memory-layout",
            "layout",
            f"the output depends on where the {'weights' if on_parameters else 'inputs'} sit in memory "
            f"({', '.join(t.name for t in differ)}){where}",
            evidence,
            fix_of("memory-layout", None if on_parameters else "inputs"),
            verified=details.aligned_fixes if on_parameters else None,
        )
    ]


def nondeterministic_kernels(e: Evidence) -> list[Cause]:
    repeat = e.diverged("repeat")
    if repeat is None or "repeat" in e.explained:
        return []
    again = e.rerun("repeat", "deterministic")
    verified = again.verdict == "identical"
    return [
        Cause(
            "nondeterministic-kernels",
            "repeat",
            "repeated forwards in one process give other bits"
            + (f", starting in {repeat.origin.module} ({repeat.origin.type})" if repeat.origin else ""),
            f"{repeat.agreed}/{repeat.runs} repeats identical; under samebits.deterministic() {again.agreed}/{again.runs}",
            fix_of("nondeterministic-kernels", None if verified else "unfixed"),
            verified=verified,
        )
    ]


# In order: a detector may explain an axis, and later ones leave an explained axis alone.
DETECTORS = (
    training_mode,
    state_between_calls,
    randomness_in_forward,
    state_mutation,
    weights_at_construction,
    per_process,
    thread_count,
    cpu_code_paths,
    batch_size,
    memory_layout,
    nondeterministic_kernels,
)


def diagnose(results: dict[str, AxisResult], model: Model, rerun: Callable[[str, str], AxisResult]) -> list[Cause]:
    """Name the causes of the divergences in ``results``, most important first.

    ``rerun(axis, condition)`` runs one axis again under a condition (``"eval"``: the model in
    eval mode; ``"deterministic"``: inside :func:`samebits.deterministic`) and returns its result,
    which is the measurement each cause is stated with.
    """
    bad = {name for name, r in results.items() if r.verdict in ("diverged", "close")}
    evidence = Evidence(results, model, rerun, bad)
    return [cause for detect in DETECTORS for cause in detect(evidence)]
