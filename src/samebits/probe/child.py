"""``python -m samebits.probe.child JOB.json``: one forward in a fresh interpreter, its trace
written back as a file. Started by :mod:`samebits.probe.processes`."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

OUTPUT_KEY = "<output>"  # the name under which a child's final output tensors come back


def _load_model(job: dict) -> object:
    if "spec" in job:
        from samebits.models import load_model

        return load_model(job["spec"]).model
    import torch

    # A file the parent wrote into its own private temporary folder: not a user's pickle.
    return torch.load(job["model_file"], map_location="cpu", weights_only=False)  # noqa: SB401


def run(job: dict) -> dict:
    import torch
    from safetensors.torch import save_file

    from samebits.determinism.rng import seed_rngs
    from samebits.models.inputs import ModelInputs
    from samebits.probe.prepare import prepare
    from samebits.probe.trace import traced_forward
    from samebits.tensors.tree import flatten

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    model = _load_model(job)
    data = torch.load(job["inputs"], map_location="cpu", weights_only=True)
    model, inputs = prepare(
        model, ModelInputs(tuple(data["args"]), data["kwargs"]), job.get("device", "cpu"), job.get("dtype")
    )
    if job.get("runtime"):  # samebits check --runtime predictor[:BACKEND]
        from samebits.runtime.predictor import runtime_model

        model = runtime_model(model, inputs, job["runtime"])
    seed_rngs(int(job.get("seed", 0)))
    if job.get("task") == "peak":
        from samebits.runtime.bench import peak_task

        return {"data": peak_task(model, inputs, **job["params"])}
    if job.get("task") == "memory":
        from samebits.probe.memory import memory_growth

        return {"data": memory_growth(model, inputs, device=job.get("device", "cpu"), **job["params"])}
    keep = set(job.get("keep") or [])
    output, trace, kept = traced_forward(model, inputs, keep=keep)
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
        from samebits.probe.ops import op_digests

        seed_rngs(int(job.get("seed", 0)))
        result["ops"] = op_digests(model, inputs, job["ops"][0], int(job["ops"][1]))
    return result


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(args[0]).read_text())
    try:
        result = run(job)
        code = 0
    except BaseException as exc:  # report every failure to the parent as data
        from samebits.errors import first_line

        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        result = {"error": f"{first_line(exc, with_type=True)}{where}"}
        code = 3
    Path(job["out"]).write_text(json.dumps(result))
    sys.exit(code)


if __name__ == "__main__":
    main()
