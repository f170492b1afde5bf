"""Causes and fixes, each found by a controlled re-run or a direct measurement, never guessed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from samebits.checker.report import AxisResult, BatchDetails, Cause, ChildrenDetails, SeedDetails, StateDetails
from samebits.measure.guard import training_modules

T = TypeVar("T")


def _names(items: list[tuple[str, str]], limit: int = 4) -> str:
    text = ", ".join(f"{n} ({t})" for n, t in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _details(result: AxisResult | None, kind: type[T]) -> T | None:
    """An axis's typed details when it has them (a skipped or failed axis has none)."""
    return result.details if result is not None and isinstance(result.details, kind) else None


def diagnose(results: dict[str, AxisResult], model: Any, rerun: Callable[[str, str], AxisResult]) -> list[Cause]:
    """Name the causes of the divergences in ``results``, most important first.

    ``rerun(axis, condition)`` runs one axis again under a condition (``"eval"``: the model in
    eval mode; ``"deterministic"``: inside :func:`samebits.deterministic`) and returns its result,
    which is the measurement each cause is stated with.
    """
    causes: list[Cause] = []
    bad = {name for name, r in results.items() if r.verdict in ("diverged", "close")}
    explained: set[str] = set()

    training = training_modules(model)
    in_process = sorted(bad & {"repeat", "seed", "state"})
    if training and in_process:
        fixed = [axis for axis in in_process if rerun(axis, "eval").verdict == "identical"]
        if fixed:
            explained.update(fixed)
            causes.append(
                Cause(
                    "training-mode",
                    ", ".join(fixed),
                    f"the model is in training mode: {_names(training)}",
                    f"with model.eval() the {', '.join(fixed)} axis{'es are' if len(fixed) > 1 else ' is'} identical",
                    "call model.eval() before inference",
                    verified=True,
                )
            )

    seed = results.get("seed")
    repeat = results.get("repeat")
    seed_details = _details(seed, SeedDetails)
    rngs = seed_details.rngs_consumed if seed_details else []
    hidden = sorted((bad & {"repeat", "seed"}) - explained) if seed is not None and not rngs else []
    if hidden:  # outputs change between calls, yet no RNG was drawn: state kept across calls
        shapes = next(
            (
                a.difference.message
                for a in (repeat, seed)
                if a is not None and a.difference and "shape" in a.difference.message.lower()
            ),
            "",
        )
        causes.append(
            Cause(
                "state-between-calls",
                ", ".join(hidden),
                "the output changes from call to call although the forward draws no random numbers: the model keeps state between calls (a counter, a cache, an attribute it updates)",
                "no torch, NumPy or Python RNG state changed during the forward"
                + (f"; {shapes.splitlines()[0]}" if shapes else ""),
                "make the forward a function of its inputs and parameters only (reset or remove the state it updates)",
            )
        )
        explained.update(hidden)
    if seed is not None and "seed" in bad and "seed" not in explained:
        modules = seed_details.modules if seed_details else []
        where = ", ".join(f"{m.module} ({m.type}: {', '.join(m.rngs)})" for m in modules) or "code hooks cannot see"
        axes = ["seed"] + (["repeat"] if rngs and "repeat" in bad and "repeat" not in explained else [])
        causes.append(
            Cause(
                "randomness-in-forward",
                ", ".join(axes),
                f"the forward draws random numbers ({', '.join(rngs) or 'from an RNG'}) in {where}",
                f"{seed.runs - seed.agreed + 1} of {seed.runs} re-seeded runs differ; the {', '.join(rngs)} RNG state changes during the forward",
                "remove sampling from inference, or seed right before each call (samebits.deterministic(seed)) / pass a torch.Generator",
            )
        )
        explained.update(axes)

    state = results.get("state")
    if state is not None and "state" in bad and "state" not in explained:
        state_details = _details(state, StateDetails)
        mods = [(m.module, m.type) for m in state_details.modules] if state_details else []
        causes.append(
            Cause(
                "state-mutation",
                "state",
                f"the forward changes the model's own tensors in {_names(mods)}",
                f"{len(state_details.changed) if state_details else 0} parameters or buffers have other digests after one forward",
                "do not update buffers in forward; put stateful modules in eval mode (model.eval())",
            )
        )
        explained.add("state")

    process = results.get("process")
    if process is not None and "process" in bad:
        process_details = _details(process, ChildrenDetails)
        fixed = process_details.fixed_hash_seed if process_details else None
        if fixed is not None and fixed.verdict == "identical":
            causes.append(
                Cause(
                    "hash-order",
                    "process",
                    "the output depends on Python's hash order (a set or dict of strings iterated in the forward)",
                    f"processes with different PYTHONHASHSEED differ; with PYTHONHASHSEED=0 all {fixed.runs} agree",
                    "start the process with `samebits run -- python ...` (fixes PYTHONHASHSEED before start), or iterate sorted(...)",
                    verified=True,
                )
            )
        elif "repeat" not in bad:
            causes.append(
                Cause(
                    "per-process",
                    "process",
                    "each process computes other bits, even with one PYTHONHASHSEED",
                    f"{(fixed.runs - fixed.agreed) if fixed else (process.runs - process.agreed)} processes with PYTHONHASHSEED=0 still differ while repeats in one process agree",
                    "build compiled artifacts (engines, autotuning) once and load the same file in every process",
                )
            )

    threads = results.get("threads")
    if threads is not None and "threads" in bad:
        thread_details = _details(threads, ChildrenDetails)
        where = f" from {threads.origin.module}" if threads.origin else ""
        causes.append(
            Cause(
                "thread-count",
                "threads",
                f"the output depends on the intra-op thread count{where}",
                f"{'forwards in this process' if thread_details and thread_details.in_process else 'fresh processes'} with {', '.join(c.label for c in thread_details.children) if thread_details else 'other thread counts'} give other bits",
                "fix the thread count: `samebits run --threads N -- ...` or samebits.deterministic(threads=N)",
            )
        )

    batch = results.get("batch")
    if batch is not None and "batch" in bad:
        batch_details = _details(batch, BatchDetails)
        where = f", starting in {batch.origin.module} ({batch.origin.type})" if batch.origin else ""
        causes.append(
            Cause(
                "batch-size",
                "batch",
                f"a sample's output depends on the batch size{where}",
                f"batch sizes that agree bit for bit: {batch_details.groups_text if batch_details else '?'}",
                "run every forward at one fixed tile size (pad the last batch) or use a batch-invariant backend",
            )
        )

    if repeat is not None and "repeat" in bad and "repeat" not in explained:
        again = rerun("repeat", "deterministic")
        verified = again.verdict == "identical"
        causes.append(
            Cause(
                "nondeterministic-kernels",
                "repeat",
                "repeated forwards in one process give other bits"
                + (f", starting in {repeat.origin.module} ({repeat.origin.type})" if repeat.origin else ""),
                f"{repeat.agreed}/{repeat.runs} repeats identical; under samebits.deterministic() {again.agreed}/{again.runs}",
                "run inference inside samebits.deterministic()"
                if verified
                else "find the nondeterministic op in the module named; samebits.deterministic() did not fix it",
                verified=verified,
            )
        )
    return causes
