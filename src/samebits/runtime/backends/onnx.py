"""ONNX Runtime: the model exported once (``torch.onnx``, dynamo), optimised for this CPU once,
and run with its own thread pool; the outputs come back in eager's structure."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from samebits.models.inputs import ModelInputs
from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob, ExportFailed, export_reason
from samebits.tensors import tree


def named_inputs(model: Any, example: ModelInputs) -> dict[str, Any]:
    """The example's arguments by the names of ``model.forward``'s parameters (positional ones
    named too), as torch.export's ``dynamic_shapes`` takes them."""
    try:
        bound = inspect.signature(model.forward if hasattr(model, "forward") else model).bind(
            *example.args, **example.kwargs
        )
    except (TypeError, ValueError):
        return {**{f"arg{i}": a for i, a in enumerate(example.args)}, **example.kwargs}
    return dict(bound.arguments)


def _batch_dims(model: Any, example: ModelInputs) -> Any:
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

    def __init__(self, session: Any, model: Any, example: ModelInputs) -> None:
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
    packages = ("onnxruntime", "onnx", "onnxscript")
    torch_threaded = False  # its own thread pool, sized when the session is built
    portable_cpu = False  # MLAS dispatches on the CPU's instruction sets; no variable caps it

    def unavailable(self, device: str) -> str | None:
        try:
            import onnxruntime  # noqa: F401
            import onnxscript  # noqa: F401  (the default exporter needs it)
        except ImportError:
            return "the onnxruntime backend needs onnxruntime and onnxscript: pip install 'samebits[onnx]'"
        if device.startswith("cuda") and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
            return (
                f"the onnxruntime backend on {device} needs ONNX Runtime's CUDA provider (pip install onnxruntime-gpu); "
                f"this onnxruntime has {', '.join(onnxruntime.get_available_providers())}"
            )
        return super().unavailable(device)

    def build(self, job: BuildJob) -> Built:
        import onnxruntime as ort

        from samebits.models.spec import OnnxModel
        from samebits.runtime.cache import build_once

        model, example = job.model, job.example
        exported = job.folder / f"onnx-{job.key}.onnx"
        optimized = job.folder / f"onnxruntime-{job.key}.ort.onnx"

        def export(tmp: Path) -> None:
            # One file for every batch size: dim 0 of each tensor argument is "batch".
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

        def optimize(tmp: Path) -> None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.optimized_model_filepath = str(tmp)
            options.log_severity_level = 3  # its note that the file is machine-specific: the key holds the device
            ort.InferenceSession(str(exported), options, providers=providers)

        providers = providers_for(job.device)
        built = build_once(exported, export)
        built = build_once(optimized, optimize) or built
        threads = job.threads or torch.get_num_threads()
        session = OnnxModel(
            optimized,
            threads=threads,
            spinning=job.spinning,
            optimize=False,
            providers=providers,
            deterministic=torch.are_deterministic_algorithms_enabled(),
        )
        return Built(StructuredOnnx(session, model, example), optimized, built)


def providers_for(device: str) -> list[Any]:
    """ONNX Runtime's providers for ``device``: the CPU's, or the CUDA provider on ``cuda:N``
    with cuDNN's convolution algorithm chosen by heuristics (its default, EXHAUSTIVE, times
    candidates in each process and can pick another one in the next: another process, other
    bits), the CPU's behind it for ops it lacks."""
    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    return [
        ("CUDAExecutionProvider", {"device_id": index, "cudnn_conv_algo_search": "DEFAULT"}),
        "CPUExecutionProvider",
    ]
