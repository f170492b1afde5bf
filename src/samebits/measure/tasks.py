"""The measuring tasks a child process runs (``python -m samebits.child TASK``): a traced forward,
memory kept by outputs, generation, timing, the CPU libraries' probe. Each takes the model and
inputs :func:`load` built and the :class:`~samebits.measure.job.Job`, and returns a
:class:`~samebits.measure.job.Reply`."""

from __future__ import annotations

import dataclasses
from typing import Any

from samebits.measure.job import Job, Reply
from samebits.measure.wire import Channel
from samebits.models.inputs import Model, ModelInputs

OUTPUT_KEY = "<output>"  # the name under which a child's final output tensors come back


def load(job: Job) -> tuple[Any, ModelInputs, dict[str, str] | None]:
    """The job's model and inputs, prepared for its device and dtype, and (a model built from its
    spec) the digests of the weights its factory built, before anything ran."""
    import torch

    from samebits.measure.prepare import prepare

    built = None
    if job.spec is not None:
        from samebits.models import load_model
        from samebits.tensors.digest import RUN_DIGEST, weights_digests

        model = load_model(job.spec).model
        built = weights_digests(model, RUN_DIGEST)
        if job.weights_file and isinstance(model, torch.nn.Module):  # compare the forward alone
            from safetensors.torch import load_file

            model.load_state_dict(load_file(job.weights_file))
    elif job.model_file is not None:
        # A file the parent wrote into its own private temporary folder: not a user's pickle.
        model = torch.load(job.model_file, map_location="cpu", weights_only=False)  # noqa: SB401
    else:
        raise ValueError(f"the {job.task} job names no model")
    if job.inputs_file is None:
        raise ValueError(f"the {job.task} job names no inputs")
    data = torch.load(job.inputs_file, map_location="cpu", weights_only=True)
    model, inputs = prepare(model, ModelInputs(tuple(data["args"]), data["kwargs"]), job.device, job.dtype)
    return model, inputs, built


def trace(model: Model, inputs: ModelInputs, job: Job) -> Reply:
    """One forward: output digests (and, with ``hooks`` or ``keep``, per-module digests), the
    output tensors and the kept ones as ``KEY|PATH``."""
    import torch

    from samebits.determinism.rng import seed_rngs
    from samebits.measure.trace import digested_forward, traced_forward
    from samebits.tensors.tree import flatten

    if job.hooks or job.keep:
        output, record, kept = traced_forward(model, inputs, keep=set(job.keep))
    else:
        (output, record), kept = digested_forward(model, inputs), {}
    kept[OUTPUT_KEY] = {p: t for p, t in flatten(output).items() if isinstance(t, torch.Tensor)}
    tensors = {
        f"{key}|{path}": t.detach().cpu()
        for key, leaves in kept.items()
        for path, t in leaves.items()
        if isinstance(t, torch.Tensor)
    }
    data: dict[str, Any] = {"trace": record.to_dict(), "threads": torch.get_num_threads()}
    if job.ops:
        from samebits.measure.ops import op_digests

        seed_rngs(job.seed)
        ops = op_digests(model, inputs, job.ops[0], job.ops[1])
        data["ops"] = [dataclasses.asdict(o) for o in ops] if ops is not None else None
    return Reply(data, tensors=tensors)


def memory(model: Model, inputs: ModelInputs, job: Job) -> Reply:
    """Memory kept by outputs over many forwards (see :func:`samebits.measure.memory.memory_growth`)."""
    from samebits.measure.memory import memory_growth

    return Reply(memory_growth(model, inputs, **{"device": job.device, **job.params}))


def generate(model: Model, inputs: ModelInputs, job: Job) -> Reply:
    """Each prompt generated alone (:class:`samebits.measure.generate.Generator`): its tokens and
    one digest per step of its scores."""
    import torch

    from samebits.measure.generate import Generator, step_digests

    params = job.params
    generate_alone = Generator(model, int(params["max_new_tokens"]), params.get("seed"), params.get("side"))
    out = [generate_alone([torch.tensor(p, dtype=torch.long)])[0] for p in params["prompts"]]
    return Reply({"tokens": [t.tolist() for t, _ in out], "digests": [step_digests(s) for _, s in out]})


def time(model: Model, inputs: ModelInputs, job: Job) -> Reply:
    """Seconds of each of a few forwards after a warm-up (what one process's code paths cost)."""
    import torch

    from samebits.measure.timing import interleaved_times

    with torch.inference_mode():
        times = interleaved_times({"forward": lambda: inputs.call(model)}, int(job.params.get("rounds", 7)), 3.0, 0.05)
    return Reply({"seconds": list(times.seconds["forward"])})


def probe(job: Job, channel: Channel) -> Reply:
    """What this process's start-up variables do to each CPU-dependent library
    (:func:`samebits.measure.code_paths.probe`); needs no model."""
    from samebits.measure.code_paths import probe as probe_libraries

    return Reply(probe_libraries())
