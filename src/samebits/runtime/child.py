"""``python -m samebits.runtime.child JOB.json``: the child entry for jobs that need the runtime:
the model wrapped in a Predictor (``check --runtime predictor[:BACKEND]``) and the bench's peak
memory task, on top of :mod:`samebits.measure.child`."""

from __future__ import annotations

from typing import Any

from samebits.measure import child

ENTRY = "samebits.runtime.child"  # what ChildRunner(entry=...) runs for jobs that need the runtime


def _wrap(model: Any, inputs: Any, job: dict[str, Any]) -> Any:
    tiles = job.get("batch_invariant")
    if not job.get("runtime"):
        if tiles:  # for the child's life: it ends with its job
            from samebits.runtime.batch_invariant import batch_invariant_forwards

            batch_invariant_forwards(model, tiles).__enter__()
        return model
    from samebits.runtime.as_model import runtime_model

    return runtime_model(
        model,
        inputs,
        job["runtime"],
        max_batch_size=job.get("max_batch_size"),
        device=job.get("device", "cpu"),
        batch_invariant=tiles,
    )


def _peak(model: Any, inputs: Any, job: dict[str, Any]) -> dict[str, Any]:
    from samebits.runtime.bench import peak_task

    return {"data": peak_task(model, inputs, **job["params"])}


TASKS: dict[str, child.Task] = {**child.TASKS, "peak": _peak}

if __name__ == "__main__":
    child.main(tasks=TASKS, wrap=_wrap)
