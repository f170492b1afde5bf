"""The runtime's part of a child process (``python -m samebits.child TASK``): the model wrapped
as a job asks (``check --runtime predictor[:BACKEND]``, ``--batch-invariant``) and the bench's
peak memory task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from samebits.errors import UserError
from samebits.measure.batching import concat_batches, random_neighbour, take_sample
from samebits.measure.job import Job, Reply
from samebits.models.inputs import Model, ModelInputs


def wrap(model: Model, inputs: ModelInputs, job: Job) -> Any:
    """The model in a runtime (``job.runtime``) or with its forwards tiled (``job.batch_invariant``)."""
    if not job.runtime:
        if job.batch_invariant:  # for the child's life: it ends with its job
            from samebits.runtime.batch_invariant import batch_invariant_forwards

            if not isinstance(model, torch.nn.Module):
                raise UserError(
                    f"--batch-invariant tiles an nn.Module's forwards; this model is a {type(model).__name__}"
                )

            batch_invariant_forwards(model, job.batch_invariant).__enter__()
        return model
    from samebits.runtime.as_model import runtime_model

    return runtime_model(
        model,
        inputs,
        job.runtime,
        max_batch_size=job.max_batch_size,
        device=job.device,
        batch_invariant=job.batch_invariant,
    )


def peak(model: Model, inputs: ModelInputs, job: Job) -> Reply:
    """Build one configuration (``job.params``: config, backend, invariant, batch, cache_dir,
    max_batch_size) and measure the peak memory of running it once."""
    return Reply({"peak_mb": peak_mb(model, inputs, **{"device": job.device, **job.params})})


def peak_mb(
    model: Model,
    inputs: ModelInputs,
    config: str,
    backend: str | None,
    invariant: bool,
    batch: int,
    cache_dir: str | None,
    max_batch_size: int | None = None,
    device: str = "cpu",
) -> float:
    """The peak memory (MiB) of running one configuration once on ``batch`` rows."""
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
        return peak_of(run, device)
