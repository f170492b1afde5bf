"""``python -m samebits.measure.child JOB.json``: one task (a traced forward, a memory probe) in a
fresh interpreter, its result written back as a file. Started by :mod:`samebits.measure.processes`;
``samebits.runtime.child`` is the same entry with the runtime's tasks and wrapping added."""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samebits.exit_codes import exit_past_user_threads

OUTPUT_KEY = "<output>"  # the name under which a child's final output tensors come back


def _load_model(job: dict) -> object:
    if "spec" in job:
        from samebits.models import load_model

        return load_model(job["spec"]).model
    import torch

    # A file the parent wrote into its own private temporary folder: not a user's pickle.
    return torch.load(job["model_file"], map_location="cpu", weights_only=False)  # noqa: SB401


Task = Callable[[Any, Any, dict], dict]


def trace_task(model: Any, inputs: Any, job: dict) -> dict:
    """One forward: output digests (and, with ``hooks`` or ``keep``, per-module digests), the
    output tensors and the kept ones in a file."""
    import torch
    from safetensors.torch import save_file

    from samebits.determinism.rng import seed_rngs
    from samebits.measure.trace import digested_forward, traced_forward
    from samebits.tensors.tree import flatten

    keep = set(job.get("keep") or [])
    if job.get("hooks") or keep:
        output, trace, kept = traced_forward(model, inputs, keep=keep)
    else:
        (output, trace), kept = digested_forward(model, inputs), {}
    kept[OUTPUT_KEY] = {p: t for p, t in flatten(output).items() if isinstance(t, torch.Tensor)}
    tensors = {
        f"{key}|{path}": t.detach().cpu().contiguous()
        for key, leaves in kept.items()
        for path, t in leaves.items()
        if isinstance(t, torch.Tensor)
    }
    save_file(tensors, job["out"] + ".safetensors")
    result = {"trace": trace.to_dict(), "threads": torch.get_num_threads()}
    if job.get("ops"):
        from samebits.measure.ops import op_digests

        seed_rngs(int(job.get("seed", 0)))
        ops = op_digests(model, inputs, job["ops"][0], int(job["ops"][1]))
        result["ops"] = [dataclasses.asdict(o) for o in ops] if ops is not None else None
    return result


def memory_task(model: Any, inputs: Any, job: dict) -> dict:
    """Memory kept by outputs over many forwards (see :func:`samebits.measure.memory.memory_growth`)."""
    from samebits.measure.memory import memory_growth

    return {"data": memory_growth(model, inputs, device=job.get("device", "cpu"), **job["params"])}


def generate_task(model: Any, inputs: Any, job: dict) -> dict:
    """Each prompt generated alone (:class:`samebits.measure.generate.Generator`): its tokens and
    one digest per step of its scores."""
    import torch

    from samebits.measure.generate import Generator, step_digests

    params = job["params"]
    generate = Generator(model, int(params["max_new_tokens"]), params.get("seed"), params.get("side"))
    out = [generate([torch.tensor(p, dtype=torch.long)])[0] for p in params["prompts"]]
    return {"data": {"tokens": [t.tolist() for t, _ in out], "digests": [step_digests(s) for _, s in out]}}


def time_task(model: Any, inputs: Any, job: dict) -> dict:
    """Seconds of each of a few forwards after a warm-up (what one process's code paths cost)."""
    import torch

    from samebits.measure.timing import interleaved_times

    params = job.get("params") or {}
    with torch.inference_mode():
        times = interleaved_times({"forward": lambda: inputs.call(model)}, int(params.get("rounds", 7)), 3.0, 0.05)
    return {"data": {"seconds": list(times.seconds["forward"])}}


def probe_task(model: Any, inputs: Any, job: dict) -> dict:
    """What this process's start-up variables do to each CPU-dependent library
    (:func:`samebits.measure.code_paths.probe`); needs no model."""
    from samebits.measure.code_paths import probe

    return {"data": probe()}


# Child tasks by name. Layers above add theirs in their own entry module (runtime/child.py).
TASKS: dict[str, Task] = {
    "trace": trace_task,
    "memory": memory_task,
    "generate": generate_task,
    "time": time_task,
    "probe": probe_task,
}
MODEL_FREE = {"probe"}  # tasks that load no model


def run(job: dict, *, tasks: dict[str, Task] = TASKS, wrap: Callable[[Any, Any, dict], Any] | None = None) -> dict:
    """Load the model and inputs the job names, ``wrap`` the model (a runtime, say), run the task."""
    import torch

    from samebits.determinism.rng import seed_rngs
    from samebits.measure.prepare import prepare
    from samebits.models.inputs import ModelInputs

    if job.get("threads"):
        from samebits.limits import thread_count

        torch.set_num_threads(thread_count(job["threads"], "the job's threads"))
    task = tasks.get(job.get("task", "trace"))
    if task is None:
        raise ValueError(f"unknown child task {job.get('task')!r}; this entry knows {', '.join(tasks)}")
    if job.get("task") in MODEL_FREE:
        return task(None, None, job)
    model = _load_model(job)
    built = None
    if "spec" in job:  # built here by its factory: which weights it built, before anything ran
        from samebits.tensors.digest import RUN_DIGEST, weights_digests

        built = weights_digests(model, RUN_DIGEST)
        if job.get("weights_file") and isinstance(model, torch.nn.Module):  # compare the forward alone
            from safetensors.torch import load_file

            model.load_state_dict(load_file(job["weights_file"]))
    data = torch.load(job["inputs"], map_location="cpu", weights_only=True)
    model, inputs = prepare(
        model, ModelInputs(tuple(data["args"]), data["kwargs"]), job.get("device", "cpu"), job.get("dtype")
    )
    if wrap is not None:
        model = wrap(model, inputs, job)
    seed_rngs(int(job.get("seed", 0)))
    result = task(model, inputs, job)
    if built and "trace" in result:
        result["weights"] = built
    return result


def main(
    argv: list[str] | None = None,
    *,
    tasks: dict[str, Task] = TASKS,
    wrap: Callable[[Any, Any, dict], Any] | None = None,
) -> None:
    """The child's entry: run the job file's task, write the result (or the error) as JSON."""
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(args[0]).read_text())
    try:
        result = run(job, tasks=tasks, wrap=wrap)
        code = 0
    except BaseException as exc:  # report every failure to the parent as data
        from samebits.errors import first_line

        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        result = {"error": f"{first_line(exc, with_type=True)}{where}"}
        code = 3
    Path(job["out"]).write_text(json.dumps(result))
    exit_past_user_threads(code)  # a thread the model's factory started must not hold the parent waiting
    sys.exit(code)


if __name__ == "__main__":
    main()
