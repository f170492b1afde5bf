"""TensorRT through torch_tensorrt's dynamo frontend: one engine built and saved, loaded by every
process (the serialized engine is what keeps processes alike: a rebuild may pick other tactics).
Written against its documented API; not yet run on a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob


class TensorRT(Backend):
    """A TensorRT engine built once and saved; every process loads the same engine instead of
    building its own. TF32 is off (eager FP32 does not use it under samebits' profiles), the
    engine is built for the Predictor's device, and the user's model is not moved."""

    name = "tensorrt"
    packages = ("tensorrt", "torch_tensorrt")
    torch_threaded = False
    keyword_inputs = False
    cuda_only = True

    def build(self, job: BuildJob) -> Built:
        from samebits.runtime.cache import build_once

        model, example, folder, key = job.model, job.example, job.folder, job.key

        try:
            import torch_tensorrt
        except ImportError:
            raise BackendUnavailable(
                "the tensorrt backend needs CUDA and the torch_tensorrt package; it is not installed here"
            ) from None
        if not torch.cuda.is_available():
            raise BackendUnavailable("the tensorrt backend needs a CUDA device, and none is available")
        if example.kwargs:
            raise BackendUnavailable("the tensorrt backend takes positional inputs only")
        options = compile_options(example.args, job.device)
        engine = folder / f"tensorrt-{key}.ep"

        def compile_engine(tmp: Path) -> None:
            # the timing cache is the build's own, removed after: TensorRT writes it in place (not
            # atomically), and a rebuild is not promised the same tactics from it anyway
            timing = tmp.with_name(tmp.name + ".timing")
            try:
                compiled = torch_tensorrt.compile(model, **options, timing_cache_path=str(timing))
                torch_tensorrt.save(compiled, str(tmp), inputs=options["inputs"])
            finally:
                timing.unlink(missing_ok=True)

        built = build_once(engine, compile_engine, code=True)
        program = torch.export.load(str(engine))
        return Built(program.module(), engine, built)


def compile_options(args: tuple[Any, ...], device: str) -> dict[str, Any]:
    """``torch_tensorrt.compile``'s options: the dynamo frontend, the example's tensors on
    ``device`` (a ``cuda:N``, never the current device by default), FP32 kernels with TF32 off."""
    if not device.startswith("cuda"):
        raise BackendUnavailable(f"the tensorrt backend runs on a CUDA device, not {device}")
    inputs = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    return {
        "ir": "dynamo",
        "inputs": inputs,
        "device": torch.device(device),
        "enabled_precisions": {torch.float32},
        "disable_tf32": True,
    }
