"""TensorRT through torch_tensorrt's dynamo frontend: one engine built and saved, loaded by every
process. Written against its documented API; not run on this project's machines (no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob


class TensorRT(Backend):
    """A TensorRT engine built once (with a timing cache) and saved; every process loads the same
    engine instead of building its own."""

    name = "tensorrt"
    packages = ("tensorrt", "torch_tensorrt")
    torch_threaded = False
    keyword_inputs = False
    cuda_only = True

    def build(self, job: BuildJob) -> Built:
        import inspect

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
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in example.args]
        engine = folder / f"tensorrt-{key}.ep"
        options: dict[str, Any] = {"ir": "dynamo", "inputs": args}
        if "timing_cache_path" in inspect.signature(torch_tensorrt.compile).parameters or "timing_cache_path" in str(
            inspect.signature(torch_tensorrt.dynamo.compile)
        ):
            options["timing_cache_path"] = str(folder / "tensorrt-timing.cache")

        def compile_engine(tmp: Path) -> None:
            compiled = torch_tensorrt.compile(model.cuda(), **options)
            torch_tensorrt.save(compiled, str(tmp), inputs=args)

        built = build_once(engine, compile_engine, code=True)
        program = torch.export.load(str(engine))
        return Built(program.module(), engine, built)
