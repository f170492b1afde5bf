"""``python -m samebits.runtime.child JOB.json``: the child entry for jobs that need the runtime:
the model wrapped in a Predictor (``check --runtime predictor[:BACKEND]``) and the bench's peak
memory task, on top of :mod:`samebits.measure.child`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from samebits.measure import child
from samebits.measure.batching import concat_batches, random_neighbour, take_sample
from samebits.models.inputs import ModelInputs

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
    return {"data": peak_task(model, inputs, **job["params"])}


def peak_task(
    model: Any,
    inputs: ModelInputs,
    config: str,
    backend: str | None,
    invariant: bool,
    batch: int,
    cache_dir: str | None,
    max_batch_size: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """In a child: build one configuration and measure the peak memory of running it once."""
    from samebits.measure.memory import peak_of
    from samebits.runtime.predictor import Predictor

    sample = take_sample(inputs, 0)
    gen = torch.Generator().manual_seed(0)
    pool = [sample] + [random_neighbour(sample, gen) for _ in range(batch - 1)]
    if config == "per-sample loop":
        run: Callable[[], Any] = lambda: [s.call(model) for s in pool]  # noqa: E731
    elif config == "eager":
        batched = concat_batches(pool)
        run = lambda: batched.call(model)  # noqa: E731
    else:
        p = Predictor(
            model,
            device=device,
            backend=backend or "eager",
            invariant=invariant,
            example_inputs=inputs,
            deterministic=False,
            cache_dir=cache_dir,
            max_batch_size=max_batch_size,
        )
        batched = concat_batches(pool)
        run = lambda: p.predict(batched)  # noqa: E731
    with torch.inference_mode():
        return {"peak_mb": peak_of(run, device)}


TASKS: dict[str, child.Task] = {**child.TASKS, "peak": _peak}

if __name__ == "__main__":
    child.main(tasks=TASKS, wrap=_wrap)
