"""Causes and fixes, each found by a controlled re-run or a direct measurement, never guessed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samebits.checker.report import AxisResult, Cause
from samebits.measure.guard import training_modules


def _names(items: list[tuple[str, str]], limit: int = 4) -> str:
    text = ", ".join(f"{n} ({t})" for n, t in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


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
    rngs = seed.details.get("rngs_consumed", []) if seed is not None else []
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
        modules = seed.details.get("modules", [])
        where = (
            ", ".join(f"{m['module']} ({m['type']}: {', '.join(m['rngs'])})" for m in modules)
            or "code hooks cannot see"
        )
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
        mods = [(m["module"], m["type"]) for m in state.details.get("modules", [])]
        causes.append(
            Cause(
                "state-mutation",
                "state",
                f"the forward changes the model's own tensors in {_names(mods)}",
                f"{len(state.details.get('changed', []))} parameters or buffers have other digests after one forward",
                "do not update buffers in forward; put stateful modules in eval mode (model.eval())",
            )
        )
        explained.add("state")

    process = results.get("process")
    if process is not None and "process" in bad:
        fixed = process.details.get("fixed_hash_seed", {})
        if fixed.get("verdict") == "identical":
            causes.append(
                Cause(
                    "hash-order",
                    "process",
                    "the output depends on Python's hash order (a set or dict of strings iterated in the forward)",
                    f"processes with different PYTHONHASHSEED differ; with PYTHONHASHSEED=0 all {fixed.get('runs')} agree",
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
                    f"{fixed.get('runs', process.runs) - fixed.get('agreed', process.agreed)} processes with PYTHONHASHSEED=0 still differ while repeats in one process agree",
                    "build compiled artifacts (engines, autotuning) once and load the same file in every process",
                )
            )

    threads = results.get("threads")
    if threads is not None and "threads" in bad:
        where = f" from {threads.origin.module}" if threads.origin else ""
        causes.append(
            Cause(
                "thread-count",
                "threads",
                f"the output depends on the intra-op thread count{where}",
                f"fresh processes with {', '.join(c['label'] for c in threads.details.get('children', []))} give other bits",
                "fix the thread count: `samebits run --threads N -- ...` or samebits.deterministic(threads=N)",
            )
        )

    batch = results.get("batch")
    if batch is not None and "batch" in bad:
        where = f", starting in {batch.origin.module} ({batch.origin.type})" if batch.origin else ""
        causes.append(
            Cause(
                "batch-size",
                "batch",
                f"a sample's output depends on the batch size{where}",
                f"batch sizes that agree bit for bit: {batch.details.get('groups_text')}",
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
