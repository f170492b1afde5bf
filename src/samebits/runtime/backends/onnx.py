"""ONNX Runtime: the model exported once (``torch.onnx``, dynamo), optimised for this CPU once,
and run with its own thread pool; the outputs come back in eager's structure."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path
from typing import Any, ClassVar

import torch

from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob, ExportFailed, export_reason
from samebits.tensors import tree


def named_inputs(model: Model, example: ModelInputs) -> dict[str, Any]:
    """The example's arguments by the names of ``model.forward``'s parameters (positional ones
    named too), as torch.export's ``dynamic_shapes`` takes them."""
    try:
        bound = inspect.signature(model.forward if hasattr(model, "forward") else model).bind(
            *example.args, **example.kwargs
        )
    except (TypeError, ValueError):
        return {**{f"arg{i}": a for i, a in enumerate(example.args)}, **example.kwargs}
    return dict(bound.arguments)


def _batch_dims(model: Model, example: ModelInputs) -> Any:
    """``dynamic_shapes`` with dim 0 of every tensor input named "batch" (in signature order)."""
    batch = torch.export.Dim("batch", min=1, max=4096)
    named = named_inputs(model, example)
    if not example.kwargs:
        return tuple({0: batch} if isinstance(a, torch.Tensor) and a.dim() else None for a in example.args)
    return {k: ({0: batch} if isinstance(v, torch.Tensor) and v.dim() else None) for k, v in named.items()}


class StructuredOnnx:
    """A session that takes the model's own arguments (keywords included) and gives back eager's
    output structure (a ``ModelOutput`` stays one). The exporter flattens outputs in torch's
    pytree order; the structure is rebuilt by samebits' output tree (``tensors.tree``), each of
    its tensors taken from the session's output at that tensor's place in the exporter's order."""

    def __init__(self, session: Any, model: Model, example: ModelInputs) -> None:
        from torch.utils import _pytree as pytree

        self.session, self.model = session, model
        with torch.inference_mode():
            self.template = example.call(model)
        order = pytree.tree_leaves(self.template)  # the exporter's order of the outputs
        place = {id(leaf): i for i, leaf in enumerate(order) if isinstance(leaf, torch.Tensor)}
        ours = tree.tensors(self.template)
        outputs = session.session.get_outputs()
        if len(order) != len(outputs) or len(place) != len(order) or any(id(t) not in place for t in ours):
            kinds = ", ".join(sorted({type(leaf).__name__ for leaf in order}))
            raise BackendUnavailable(
                f"the onnxruntime backend's {len(outputs)} outputs cannot be matched to the structure of eager's ({len(order)} leaves: {kinds})"
            )
        self.place = place
        self.names = [i.name for i in session.session.get_inputs()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch.utils import _pytree as pytree

        named = named_inputs(self.model, ModelInputs(args, kwargs))
        if all(n in named for n in self.names):
            feed = [named[n] for n in self.names]
        else:  # inputs the exporter renamed: its order is the flattened signature order
            feed = [t for t in pytree.tree_leaves(list(named.values())) if isinstance(t, torch.Tensor)]
        outs = self.session(*feed)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        return tree.map_tensors(lambda t: outs[self.place[id(t)]], self.template)


class OnnxRuntime(Backend):
    name = "onnxruntime"
    packages: ClassVar[tuple[str, ...]] = ("onnxruntime", "onnxruntime-gpu", "onnx", "onnxscript")
    torch_threaded = False  # its own thread pool, sized when the session is built
    portable_cpu = False  # MLAS dispatches on the CPU's instruction sets; no variable caps it
    # the provider a CUDA device needs, and how to get it
    cuda_provider: ClassVar[tuple[str, str]] = (
        "CUDAExecutionProvider",
        "ONNX Runtime's CUDA provider (pip install onnxruntime-gpu)",
    )

    def unavailable(self, device: str) -> str | None:
        try:
            import onnxruntime  # noqa: F401
            import onnxscript  # noqa: F401  (the default exporter needs it)
        except ImportError:
            return "the onnxruntime backend needs onnxruntime and onnxscript: pip install 'samebits[onnx]'"
        provider, what = self.cuda_provider
        if device.startswith("cuda") and provider not in (have := onnxruntime.get_available_providers()):
            return f"the {self.name} backend on {device} needs {what}; this onnxruntime has {', '.join(have)}"
        return super().unavailable(device)

    def build(self, job: BuildJob) -> Built:
        import onnxruntime as ort

        from samebits.runtime.cache import build_once

        exported, built = self.export(job)
        optimized = job.folder / f"onnxruntime-{job.key}.ort.onnx"

        def optimize(tmp: Path) -> None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.optimized_model_filepath = str(tmp)
            options.log_severity_level = 3  # its note that the file is machine-specific: the key holds the device
            first_provider(ort.InferenceSession(str(exported), options, providers=providers), providers)

        providers = providers_for(job.device)
        built = build_once(optimized, optimize) or built
        return self.loaded(optimized, job, providers, built)

    def loaded(self, path: Path, job: BuildJob, providers: list[Any], built: bool) -> Built:
        """A session on ``path`` with ``providers`` (its own threads), taking and giving eager's structures."""
        from samebits.models.spec import OnnxModel

        session = OnnxModel(
            path,
            threads=job.threads or torch.get_num_threads(),
            spinning=job.spinning,
            optimize=False,
            providers=providers,
            deterministic=torch.are_deterministic_algorithms_enabled(),
        )
        first_provider(session.session, providers)
        return Built(StructuredOnnx(session, job.model, job.example), path, built)

    def export(self, job: BuildJob) -> tuple[Path, bool]:
        """The model as one ONNX file (built once; dim 0 of each tensor argument named "batch"
        where ``job.dynamic_batch``), and whether it was exported here."""
        from samebits.runtime.cache import build_once

        model, example = job.module(self.name), job.example
        exported = job.folder / f"onnx-{job.key}.onnx"

        def export(tmp: Path) -> None:
            dynamic = _batch_dims(model, example) if job.dynamic_batch else None
            try:
                torch.onnx.export(
                    model,
                    example.args,
                    str(tmp),
                    kwargs=example.kwargs or None,
                    dynamo=True,
                    verbose=False,
                    dynamic_shapes=dynamic,
                    external_data=False,
                )
            except Exception as exc:
                raise ExportFailed(f"the model does not export to ONNX: {export_reason(exc)}") from exc

        return exported, build_once(exported, export)


class OnnxRuntimeTensorRT(OnnxRuntime):
    """ONNX Runtime's TensorRT provider: the engine built once per batch size and saved inside
    an ONNX "EP context" file (the engine embedded), which every process loads instead of
    building its own; FP32 (FP16 and INT8 off). The provider has no TF32 switch: TensorRT's
    FP32 engines may use TF32 where eager under samebits' profiles does not. Not yet run on a GPU."""

    name = "onnxruntime-tensorrt"
    packages = ("onnxruntime-gpu", "onnx", "onnxscript", "tensorrt")
    cuda_only = True
    auto = False  # an engine build takes minutes; asked for by name
    cuda_provider = (
        "TensorrtExecutionProvider",
        "ONNX Runtime's TensorRT provider (onnxruntime-gpu and TensorRT's libraries)",
    )

    def build(self, job: BuildJob) -> Built:
        import onnxruntime as ort

        from samebits.runtime.cache import build_once

        exported, built = self.export(job)
        engine = job.folder / f"onnxruntime-tensorrt-{job.key}.ctx.onnx"

        def compile_engine(tmp: Path) -> None:
            # the timing cache is the build's own, removed after: TensorRT writes it in place (not
            # atomically), and a rebuild is not promised the same tactics from it anyway
            timing = tmp.with_name(tmp.name + ".timing")
            timing.mkdir()
            try:
                options = ort.SessionOptions()
                options.log_severity_level = 3
                wanted = tensorrt_providers(job.device, tmp, timing)
                first_provider(ort.InferenceSession(str(exported), options, providers=wanted), wanted)
            finally:
                shutil.rmtree(timing, ignore_errors=True)
            if tmp.stat().st_size == 0:  # the cache made tmp empty; the provider wrote nothing into it
                raise BackendUnavailable("ONNX Runtime's TensorRT provider wrote no engine for this model")

        built = build_once(engine, compile_engine, code=True) or built  # an engine is code TensorRT loads
        return self.loaded(engine, job, tensorrt_providers(job.device), built)


def first_provider(session: Any, providers: list[Any]) -> str:
    """The provider ``session`` runs first, which must be the first asked for: where the CUDA or
    TensorRT provider fails to load (a missing CUDA library, no GPU free), ONNX Runtime builds the
    session on the next provider, the CPU's at the end, and says so only in a log line that
    :func:`~samebits.runtime.backends.capture.quiet` captures; a backend on ``cuda`` would then
    run on the CPU without a word."""
    wanted = providers[0] if isinstance(providers[0], str) else providers[0][0]
    running = list(session.get_providers())
    if not running or running[0] != wanted:
        raise BackendUnavailable(
            f"ONNX Runtime did not start its {wanted} (it runs {', '.join(running) or 'nothing'} instead): "
            "its CUDA libraries or the GPU are not usable here (onnxruntime.preload_dlls() and the "
            "CUDA extras of onnxruntime-gpu; docs/gpu.md)"
        )
    return wanted


def providers_for(device: str) -> list[Any]:
    """ONNX Runtime's providers for ``device``: the CPU's, or the CUDA provider on ``cuda:N``
    (:func:`cuda_options`) with the CPU's behind it for ops it lacks."""
    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    return [("CUDAExecutionProvider", cuda_options(device)), "CPUExecutionProvider"]


def cuda_options(device: str) -> dict[str, Any]:
    """The CUDA provider's options on ``cuda:N``: cuDNN's convolution algorithm fixed
    (``DEFAULT`` is ``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM`` whatever the shape; the
    provider's default, EXHAUSTIVE, times candidates in each process and can pick another one in
    the next: another process, other bits), and TF32 only where both torch's matmuls and its
    cuDNN convolutions may use it: the provider's one ``use_tf32`` governs its matmuls and its
    convolutions alike (its default is on; samebits' profiles turn torch's off)."""
    from samebits.determinism.precision import tf32_convolutions_allowed, tf32_matmuls_allowed

    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    tf32 = tf32_matmuls_allowed() and tf32_convolutions_allowed()
    return {"device_id": index, "cudnn_conv_algo_search": "DEFAULT", "use_tf32": "1" if tf32 else "0"}


def tensorrt_providers(device: str, dump_to: Path | None = None, timing: Path | None = None) -> list[Any]:
    """The TensorRT provider (FP32) before the CUDA and CPU providers, on ``cuda:N``. ``dump_to``:
    build the engine and write it, embedded, into that ONNX "EP context" file, with TensorRT's
    timing cache in the folder ``timing``; without it, the session loads such a file."""
    cuda = cuda_options(device)
    options: dict[str, Any] = {"device_id": cuda["device_id"], "trt_fp16_enable": "0", "trt_int8_enable": "0"}
    if dump_to is not None:
        options |= {
            "trt_dump_ep_context_model": "1",
            "trt_ep_context_file_path": str(dump_to),
            "trt_ep_context_embed_mode": "1",
            "trt_force_sequential_engine_build": "1",
        }
    if timing is not None:
        options |= {"trt_timing_cache_enable": "1", "trt_timing_cache_path": str(timing)}
    return [("TensorrtExecutionProvider", options), ("CUDAExecutionProvider", cuda), "CPUExecutionProvider"]
