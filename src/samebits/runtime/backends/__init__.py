"""The backend registry: one class per backend (eager, TorchScript, torch.export, torch.compile,
ONNX Runtime and its TensorRT provider, TensorRT) with its facts, read by the Predictor, ``backend="auto"``, the predict
workers, ``doctor`` and ``bench``. Compiled artifacts are files keyed by content, built once and
loaded everywhere."""

from __future__ import annotations

from pathlib import Path

from samebits import deadline
from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.backends.base import Backend, BackendUnavailable, Built, BuildJob, ExportFailed
from samebits.runtime.backends.capture import Captured, quiet
from samebits.runtime.backends.native import Compile, Eager, Export, TorchScript
from samebits.runtime.backends.onnx import OnnxRuntime, OnnxRuntimeTensorRT
from samebits.runtime.backends.tensorrt import TensorRT

REGISTRY: dict[str, Backend] = {
    b.name: b for b in (Eager(), TorchScript(), Export(), Compile(), OnnxRuntime(), OnnxRuntimeTensorRT(), TensorRT())
}
BACKENDS = tuple(REGISTRY)

__all__ = [
    "BACKENDS",
    "REGISTRY",
    "Backend",
    "BackendUnavailable",
    "BuildJob",
    "Built",
    "Captured",
    "ExportFailed",
    "backend",
    "backend_versions",
    "build",
    "quiet",
]


def backend(name: str, also: tuple[str, ...] = ()) -> Backend:
    """The registered backend ``name``; a :class:`UserError` naming the choices for any other
    (``also``: other names the caller accepts, such as ``auto``, listed in the message)."""
    if name not in REGISTRY:
        raise UserError(
            f"unknown backend '{name}'; choose from {', '.join(BACKENDS)}" + "".join(f" or {a}" for a in also)
        )
    return REGISTRY[name]


def backend_versions(name: str) -> dict[str, str]:
    """Versions of the packages a backend's artifact depends on (part of its content key)."""
    return backend(name).versions()


def build(
    name: str,
    model: Model,
    example: ModelInputs,
    folder: Path,
    key: str,
    *,
    device: str = "cpu",
    threads: int | None = None,
    spinning: bool = True,
    dynamic_batch: bool = False,
) -> Built:
    """A runner for ``model`` through backend ``name``; artifacts go to ``folder/<name>-<key>.*``.
    What the exporters and compilers print meanwhile is captured into ``Built.log``."""
    chosen = backend(name)
    job = BuildJob(model, example, folder, key, threads, spinning, dynamic_batch, device)
    if name == "eager":
        return chosen.build(job)
    if example.kwargs and not chosen.keyword_inputs:
        raise BackendUnavailable(f"the {name} backend takes positional inputs only; this model's inputs have keywords")
    reason = chosen.unavailable(device)
    if reason is not None:
        raise BackendUnavailable(reason)
    from samebits.determinism import precision

    before = precision.read_state()
    with quiet() as captured, deadline.paused():  # building is not a forward: no hang watchdog meanwhile
        try:
            built = chosen.build(job)
        finally:  # torch.export saves and puts back cuDNN's TF32 switch through the legacy API,
            if precision.read_state() != before:  # which resets cudnn.conv/rnn.fp32_precision
                precision.restore(before)
    built.log = captured.summary()
    return built
