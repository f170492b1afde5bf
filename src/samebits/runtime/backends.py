"""Run a model through a backend: eager, TorchScript, torch.export, torch.compile, ONNX Runtime
or TensorRT. Compiled artifacts are files keyed by content, built once and loaded everywhere."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from samebits import deadline
from samebits.errors import UserError
from samebits.models.inputs import ModelInputs

BACKENDS = ("eager", "torchscript", "export", "compile", "onnxruntime", "tensorrt")


class BackendUnavailable(UserError):
    """A backend that cannot run here (missing package, compiler or device), with the reason."""


@dataclasses.dataclass
class Built:
    runner: Callable[..., Any]
    artifact: Path | None = None
    built_here: bool = False  # False: loaded from a file another process (or run) built
    log: dict[str, Any] = dataclasses.field(
        default_factory=dict
    )  # what third-party code printed meanwhile (Captured.summary)


@dataclasses.dataclass
class Captured:
    """What third-party code printed while a backend was built (its logs, FX dumps, warnings)."""

    text: str = ""

    def summary(self, tail: int = 5) -> dict[str, Any]:
        lines = [line for line in _ANSI.sub("", self.text).splitlines() if line.strip()]
        return {"lines": len(lines), "tail": lines[-tail:]}


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@contextlib.contextmanager
def quiet() -> Iterator[Captured]:
    """Exporters and compilers print their steps, graph dumps and warnings on stdout and stderr,
    from Python and from C++: capture both at the file-descriptor level, so reports stay clean;
    the text is kept in the yielded :class:`Captured`."""
    loggers = [
        logging.getLogger(name)
        for name in ("torch.onnx", "torch.export", "torch._dynamo", "torch._inductor", "onnxscript")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    captured = Captured()
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()) as out,
                contextlib.redirect_stderr(io.StringIO()) as err,
                warnings.catch_warnings(record=True) as caught,
            ):
                warnings.simplefilter("always")
                yield captured
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
            sink.seek(0)
            own = [w for w in caught if str(w.message).startswith("samebits:")]  # samebits' own notes pass through
            noted = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught if w not in own)
            captured.text = out.getvalue() + err.getvalue() + noted + sink.read().decode(errors="replace")
        for w in own:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def build(
    name: str,
    model: Any,
    example: ModelInputs,
    folder: Path,
    key: str,
    *,
    threads: int | None = None,
    spinning: bool = True,
    dynamic_batch: bool = False,
) -> Built:
    """A runner for ``model`` through backend ``name``; artifacts go to ``folder/<name>-<key>.*``.
    What the exporters and compilers print meanwhile is captured into ``Built.log``."""
    if name == "eager":
        return Built(model)
    if name not in BACKENDS:
        raise UserError(f"unknown backend '{name}'; choose from {', '.join(BACKENDS)}")
    if example.kwargs and name == "torchscript":
        raise BackendUnavailable(f"the {name} backend takes positional inputs only; this model's inputs have keywords")
    from samebits.determinism import precision

    before = precision.read_state()
    with quiet() as captured, deadline.paused():  # building is not a forward: no hang watchdog meanwhile
        try:
            built = _build(name, model, example, folder, key, threads, spinning, dynamic_batch)
        finally:  # torch.export saves and puts back cuDNN's TF32 switch through the legacy API,
            if precision.read_state() != before:  # which resets cudnn.conv/rnn.fp32_precision
                precision.restore(before)
    built.log = captured.summary()
    return built


def _build(
    name: str,
    model: Any,
    example: ModelInputs,
    folder: Path,
    key: str,
    threads: int | None,
    spinning: bool,
    dynamic_batch: bool,
) -> Built:
    from samebits.runtime.cache import build_once

    if name == "torchscript":
        path = folder / f"torchscript-{key}.pt"
        built = build_once(
            path, lambda tmp: torch.jit.trace(model, example.args, check_trace=False).save(str(tmp)), code=True
        )  # TorchScript can unpickle code
        return Built(torch.jit.load(str(path)), path, built)
    if name == "export":
        path = folder / f"export-{key}.pt2"
        built = build_once(
            path, lambda tmp: torch.export.save(torch.export.export(model, example.args, example.kwargs), str(tmp))
        )
        from samebits.models.pt2_archive import load_exported

        return Built(load_exported(path).module(), path, built)
    if name == "compile":
        if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
            raise BackendUnavailable("torch.compile on CPU needs a C++ compiler at run time, and none is on PATH")
        return _compiled(model, example, folder)
    if name == "onnxruntime":
        return _onnxruntime(model, example, folder, key, threads, spinning, dynamic_batch)
    return _tensorrt(model, example, folder, key)


def backend_versions(name: str) -> dict[str, str]:
    """Versions of the packages a backend's artifact depends on (part of its content key)."""
    import importlib.metadata

    packages = {"onnxruntime": ("onnxruntime", "onnx", "onnxscript"), "tensorrt": ("tensorrt", "torch_tensorrt")}.get(
        name, ()
    )
    out = {}
    for package in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[package] = importlib.metadata.version(package)
    return out


def _tensorrt(model: Any, example: ModelInputs, folder: Path, key: str) -> Built:
    """A TensorRT engine built once (with a timing cache, so that a rebuild replays the same
    tactics) and saved; every process loads the same engine instead of building its own.

    Written for torch_tensorrt's dynamo frontend; not run on this project's machines (no GPU)."""
    import inspect

    from samebits.runtime.cache import build_once

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


def _compiled(model: Any, example: ModelInputs, folder: Path) -> Built:
    """torch.compile, compiled now on the example (one static shape), with inductor's cache in
    ``folder/inductor`` so that every process that compiles the same graph finds the same
    kernels (compiled code: only from a folder no one else can write)."""
    from samebits.runtime.cache import ArtifactCache, CacheError

    store = ArtifactCache(folder)
    if reason := store.untrusted_reason():
        raise CacheError(
            f"{reason}: samebits does not load inductor's compiled kernels from it; chmod go-w it or pass another cache_dir"
        )
    cache = store.record_folder("inductor")
    compiled = torch.compile(model, dynamic=False)
    try:
        from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

        cache_dir: contextlib.AbstractContextManager[Any] = temporary_cache_dir(str(cache))
    except ImportError:  # private API: without it the compile cache stays where torch puts it
        cache_dir = contextlib.nullcontext()
    with cache_dir, torch.inference_mode():
        compiled(*example.args, **example.kwargs)
    return Built(compiled, cache)


def _named_inputs(model: Any, example: ModelInputs) -> dict[str, Any]:
    """The example's arguments by the names of ``model.forward``'s parameters (positional ones
    named too), as torch.export's ``dynamic_shapes`` takes them."""
    import inspect

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
    named = _named_inputs(model, example)
    if not example.kwargs:
        return tuple({0: batch} if isinstance(a, torch.Tensor) and a.dim() else None for a in example.args)
    return {k: ({0: batch} if isinstance(v, torch.Tensor) and v.dim() else None) for k, v in named.items()}


class StructuredOnnx:
    """An :class:`OnnxModel` that takes the model's own arguments (keywords included) and gives
    back eager's output structure (a ``ModelOutput`` stays one), rebuilt with torch's pytree."""

    def __init__(self, session: Any, model: Any, example: ModelInputs) -> None:
        from torch.utils import _pytree as pytree

        self.session, self.model = session, model
        with torch.inference_mode():
            eager = example.call(model)
        leaves, self.spec = pytree.tree_flatten(eager)
        outputs = session.session.get_outputs()
        if not all(isinstance(leaf, torch.Tensor) for leaf in leaves) or len(leaves) != len(outputs):
            kinds = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
            raise BackendUnavailable(
                f"the onnxruntime backend's {len(outputs)} outputs cannot be matched to the structure of eager's ({len(leaves)} leaves: {kinds})"
            )
        self.names = [i.name for i in session.session.get_inputs()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch.utils import _pytree as pytree

        named = _named_inputs(self.model, ModelInputs(args, kwargs))
        if all(n in named for n in self.names):
            feed = [named[n] for n in self.names]
        else:  # inputs the exporter renamed: its order is the flattened signature order
            feed = [t for t in pytree.tree_leaves(list(named.values())) if isinstance(t, torch.Tensor)]
        outs = self.session(*feed)
        return pytree.tree_unflatten(list(outs) if isinstance(outs, tuple) else [outs], self.spec)


def _onnxruntime(
    model: Any, example: ModelInputs, folder: Path, key: str, threads: int | None, spinning: bool, dynamic_batch: bool
) -> Built:
    from samebits.runtime.cache import build_once

    try:
        import onnxruntime as ort
        import onnxscript  # noqa: F401  (the default exporter needs it)
    except ImportError:
        raise BackendUnavailable(
            "the onnxruntime backend needs onnxruntime and onnxscript: pip install 'samebits[onnx]'"
        ) from None
    exported = folder / f"onnx-{key}.onnx"
    optimized = folder / f"onnxruntime-{key}.ort.onnx"

    def export(tmp: Path) -> None:
        # One file for every batch size: dim 0 of each tensor argument is "batch".
        dynamic = _batch_dims(model, example) if dynamic_batch else None
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
            raise ExportFailed(f"the model does not export to ONNX: {_export_reason(exc)}") from exc

    def optimize(tmp: Path) -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(tmp)
        options.log_severity_level = 3  # its note that the file is machine-specific: the key holds the CPU
        ort.InferenceSession(str(exported), options, providers=["CPUExecutionProvider"])

    built = build_once(exported, export)
    built = build_once(optimized, optimize) or built
    from samebits.models.spec import OnnxModel

    session = OnnxModel(optimized, threads=threads or torch.get_num_threads(), spinning=spinning, optimize=False)
    return Built(StructuredOnnx(session, model, example), optimized, built)


class ExportFailed(BackendUnavailable):
    """The model could not be exported for a backend (with torch.export's reason)."""


def _export_reason(exc: BaseException) -> str:
    """The line of an exporter's error that says why (its first line is a generic banner)."""
    from samebits.errors import first_line

    cause = exc.__cause__ or exc
    return first_line(cause, with_type=True)
