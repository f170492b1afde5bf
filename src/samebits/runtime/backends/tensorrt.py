"""TensorRT through torch_tensorrt's dynamo frontend: one engine built and saved, loaded by every
process (the serialized engine is what keeps processes alike: a rebuild may pick other tactics).
Built strongly typed, TF32 off and, where this TensorRT has it, with
``BuilderFlag.DISTRIBUTIVE_INDEPENDENCE`` (its matmuls, reductions and einsums compute each slice
along a distributive axis, the batch among them, with identical operations: a batch-invariant
engine). Written against torch_tensorrt's and TensorRT's documented APIs; not yet run on a GPU."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import torch

from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob

ENGINE_OP = "tensorrt.execute_engine"  # the node each TensorRT engine is in a saved program


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
        accepted = inspect.signature(torch_tensorrt.dynamo.compile).parameters
        options = compile_options(example.args, job.device, accepted)
        engine = folder / f"tensorrt-{key}.ep"

        def compile_engine(tmp: Path) -> None:
            # the timing cache is the build's own, removed after: TensorRT writes it in place (not
            # atomically), and a rebuild is not promised the same tactics from it anyway
            timing = tmp.with_name(tmp.name + ".timing")
            try:
                with distributive_independence():
                    compiled = torch_tensorrt.compile(model, **options, timing_cache_path=str(timing))
                torch_tensorrt.save(compiled, str(tmp), inputs=options["inputs"])
            finally:
                timing.unlink(missing_ok=True)

        built = build_once(engine, compile_engine, code=True)
        program = torch.export.load(str(engine))
        engines, left = graph_split(program.graph)
        if not engines:
            raise BackendUnavailable(
                f"TensorRT took none of this model's ops: its {left} op(s) all stayed in PyTorch "
                "(no tensorrt.execute_engine node in the built program)"
            )
        return Built(program.module(), engine, built)


def cuda_index(device: str) -> int:
    """The index of CUDA device ``device`` (``cuda`` is the current one): torch_tensorrt turns a
    ``torch.device("cuda")`` into ``gpu_id=None`` and then calls ``torch.device(None)``."""
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


def compile_options(args: tuple[Any, ...], device: str, accepted: Collection[str] = ()) -> dict[str, Any]:
    """``torch_tensorrt.compile``'s options: the dynamo frontend, the example's tensors on
    ``device`` (an explicit ``cuda:N``, never the current device by default), TF32 off, every op
    TensorRT can convert taken however small the graph (``min_block_size`` 1: at its default of 5
    a small model stays in PyTorch without a word), and strong typing where the compiler has the
    switch (``accepted``: the parameters of ``torch_tensorrt.dynamo.compile``; from 2.13 on it is
    always strongly typed and has none)."""
    if not device.startswith("cuda"):
        raise BackendUnavailable(f"the tensorrt backend runs on a CUDA device, not {device}")
    others = sorted({type(a).__name__ for a in args if not isinstance(a, torch.Tensor)})
    if others:
        raise BackendUnavailable(
            f"the tensorrt backend takes tensor inputs only; this model's inputs include {', '.join(others)}"
        )
    where = torch.device("cuda", cuda_index(device))
    options: dict[str, Any] = {
        "ir": "dynamo",
        "inputs": [a.to(where) for a in args],
        "device": where,
        "enabled_precisions": {torch.float32},
        "disable_tf32": True,
        "min_block_size": 1,
    }
    if "use_explicit_typing" in accepted:
        options["use_explicit_typing"] = True
    return options


@contextlib.contextmanager
def distributive_independence() -> Iterator[str | None]:
    """Engines built in the block with TensorRT's ``BuilderFlag.DISTRIBUTIVE_INDEPENDENCE`` set,
    where this TensorRT has the flag and torch_tensorrt builds its configuration where it can be
    reached (``TRTInterpreter._populate_trt_builder_config``, which torch_tensorrt offers no
    option for). Yields ``None`` where set, else why not."""
    try:
        import tensorrt as trt
        from torch_tensorrt.dynamo.conversion._TRTInterpreter import TRTInterpreter
    except ImportError as exc:
        yield f"TensorRT's builder is not reachable here ({exc})"
        return
    flag = getattr(trt.BuilderFlag, "DISTRIBUTIVE_INDEPENDENCE", None)
    populate = getattr(TRTInterpreter, "_populate_trt_builder_config", None)
    if flag is None:
        yield "this TensorRT has no BuilderFlag.DISTRIBUTIVE_INDEPENDENCE"
        return
    if populate is None:
        yield "this torch_tensorrt builds its configuration where it cannot be reached"
        return
    with with_flag(TRTInterpreter, "_populate_trt_builder_config", flag):
        yield None


@contextlib.contextmanager
def with_flag(owner: Any, method: str, flag: Any) -> Iterator[None]:
    """``owner.method`` returning its builder configuration with ``flag`` set, for the block."""
    original = getattr(owner, method)

    def populate(self: Any, *args: Any, **kwargs: Any) -> Any:
        config = original(self, *args, **kwargs)
        config.set_flag(flag)
        return config

    setattr(owner, method, populate)
    try:
        yield
    finally:
        setattr(owner, method, original)


def graph_split(graph: Any) -> tuple[int, int]:
    """(TensorRT engines, other ops) among the calls of a built program's graph: an engine is one
    ``torch.ops.tensorrt.execute_engine`` node; the other calls run in PyTorch."""
    calls = [node for node in graph.nodes if node.op == "call_function"]
    engines = sum(ENGINE_OP in str(node.target) for node in calls)
    return engines, len(calls) - engines
