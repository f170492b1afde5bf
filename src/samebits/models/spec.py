"""Load a MODEL spec: a factory in a file or module, TorchScript, torch.export, ONNX, or a demo."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from samebits import deadline
from samebits.errors import MissingDependencyError, SpecError, first_line, user_code
from samebits.models.inputs import Model, ModelInputs

Kind = Literal["demo", "factory", "torchscript", "export", "onnx"]

SPEC_HELP = (
    "MODEL is one of: path/to/file.py:factory, package.module:factory, a TorchScript .pt, "
    "a torch.export .pt2, an .onnx file, or demo:NAME (see `samebits demo list`)"
)


@dataclasses.dataclass
class LoadedModel:
    """A loaded model, the example inputs its spec provided (if any), and what it is."""

    model: Model  # an nn.Module, or a callable runner for ONNX
    example_inputs: ModelInputs | None
    spec: str  # the MODEL spec, or a label such as "<Linear object>" for an in-memory model
    kind: Kind
    in_memory: bool = False  # True: no spec a fresh process could load

    @property
    def hookable(self) -> bool:
        """Whether forward hooks can see its submodules (not inside TorchScript or ONNX)."""
        return self.kind in ("demo", "factory", "export")


def is_data_only_spec(spec: str) -> bool:
    """A spec that loads data, never code: ``demo:NAME``, a scanned ``.pt2`` or an ``.onnx`` file.
    ``file.py:factory``, ``module:factory`` and TorchScript ``.pt`` run code the user chose."""
    return spec.startswith("demo:") or spec.lower().endswith((".pt2", ".onnx"))


def load_model(spec: str) -> LoadedModel:
    """Load ``spec``; every failure is a :class:`SpecError` whose one line says what to do.
    Under the CLI, a load that makes no progress for its bound ends the command (exit 2)."""
    spec = spec.strip()
    if not spec:
        raise SpecError(f"empty MODEL; {SPEC_HELP}")
    with deadline.loading(f"MODEL {spec}"):
        return _load(spec)


def _load(spec: str) -> LoadedModel:
    if spec.startswith("demo:"):
        return _load_demo(spec)
    lower = spec.lower()
    if lower.endswith(".onnx"):
        return _load_onnx(spec)
    if lower.endswith(".pt2"):
        return _load_export(spec)
    if lower.endswith((".pt", ".pth", ".ts", ".jit")):
        return _load_torchscript(spec)
    path, sep, attr = spec.rpartition(":")
    if not sep or not attr or not path:
        raise SpecError(f"cannot read MODEL '{spec}': no ':factory' part; {SPEC_HELP}")
    if path.endswith(".py") or "/" in path or "\\" in path:
        module = _import_file(path, spec)
    else:
        module = _import_module(path, spec)
    return _call_factory(module, attr, spec)


def _load_demo(spec: str) -> LoadedModel:
    from samebits.models.demos import DEMOS

    name = spec.removeprefix("demo:")
    if name not in DEMOS:
        raise SpecError(f"unknown demo model '{name}'; choose one of {', '.join(DEMOS)}")
    model, example = DEMOS[name]()
    return LoadedModel(model, ModelInputs.from_example(example), spec, "demo")


@contextlib.contextmanager
def _on_sys_path(folder: Path) -> Iterator[None]:
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _import_file(path: str, spec: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"MODEL file '{path}' does not exist")
    name = "samebits_user_" + hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, file)
    if module_spec is None or module_spec.loader is None:
        raise SpecError(f"cannot import '{path}' as Python code")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        with _on_sys_path(file.resolve().parent), user_code("the model's file"):
            module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise SpecError(f"importing '{path}' failed: {type(exc).__name__}: {first_line(exc)}") from exc
    return module


def _import_module(path: str, spec: str) -> Any:
    try:
        with _on_sys_path(Path.cwd()), user_code("the model's module"):
            return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name and path.startswith(exc.name):
            raise SpecError(
                f"no module named '{path}' (from MODEL '{spec}'); check the name or pass path/to/file.py:factory"
            ) from exc
        raise SpecError(f"importing '{path}' failed: {first_line(exc)}") from exc
    except Exception as exc:
        raise SpecError(f"importing '{path}' failed: {type(exc).__name__}: {first_line(exc)}") from exc


def _call_factory(module: Any, attr: str, spec: str) -> LoadedModel:
    if not hasattr(module, attr):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))[:8]
        raise SpecError(
            f"'{spec}': the module has no attribute '{attr}'"
            + (f"; callables there: {', '.join(public)}" if public else "")
        )
    factory = getattr(module, attr)
    if isinstance(factory, nn.Module):
        return LoadedModel(factory, None, spec, "factory")
    if not callable(factory):
        raise SpecError(f"'{spec}': '{attr}' is a {type(factory).__name__}, not a factory function or an nn.Module")
    try:
        with user_code("the factory"):
            result = factory()
    except Exception as exc:
        raise SpecError(f"factory '{spec}' raised {type(exc).__name__}: {first_line(exc)}") from exc
    example = None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module):
        result, example = result
    if not isinstance(result, nn.Module):
        raise SpecError(
            f"factory '{spec}' returned a {type(result).__name__}; it must return an nn.Module or (module, example_inputs)"
        )
    return LoadedModel(result, ModelInputs.from_example(example) if example is not None else None, spec, "factory")


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"MODEL file '{path}' does not exist")
    return p


def _load_torchscript(spec: str) -> LoadedModel:
    p = _existing(spec)
    try:
        return LoadedModel(torch.jit.load(str(p), map_location="cpu"), None, spec, "torchscript")
    except Exception as exc:
        raise SpecError(f"'{spec}' {_what_is_it(p)}") from exc


def _what_is_it(p: Path) -> str:
    """Explain what a .pt file that is not TorchScript holds, without unpickling anything unsafe."""
    if not zipfile.is_zipfile(p):
        return "is not a TorchScript archive (not a zip file); save the model with torch.jit.script(m).save(path)"
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception:
        return (
            "is a pickled object saved with torch.save(model), not TorchScript; samebits does not unpickle "
            "code. Pass a factory (file.py:make_model) or save it with torch.jit.script(model).save(path)"
        )
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return (
            f"is a state_dict ({len(obj)} tensors), not a model; pass a factory (file.py:make_model) "
            "that builds the module and calls load_state_dict(torch.load(path, weights_only=True))"
        )
    return f"holds a {type(obj).__name__} saved with torch.save, not TorchScript; pass a factory (file.py:make_model)"


def _load_export(spec: str) -> LoadedModel:
    from samebits.models.pt2_archive import load_exported

    program = load_exported(_existing(spec))  # data only: nothing in the archive may be unpickled or run
    example = getattr(program, "example_inputs", None)
    inputs = ModelInputs(args=tuple(example[0]), kwargs=dict(example[1])) if example else None
    return LoadedModel(program.module(), inputs, spec, "export")


class OnnxModel:
    """Runs an ONNX file through onnxruntime with tensors in and out: on the CPU, or with
    ``providers`` (ONNX Runtime's CUDA provider for a CUDA device)."""

    def __init__(
        self,
        path: Path,
        threads: int | None = None,
        spinning: bool = True,
        optimize: bool = True,
        providers: list[Any] | None = None,
        deterministic: bool = False,
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise MissingDependencyError("onnxruntime", "running .onnx models", extra="onnx") from None
        options = ort.SessionOptions()
        options.use_deterministic_compute = deterministic  # its kernels' deterministic variants
        if threads:
            options.intra_op_num_threads = threads
        if not spinning:  # idle threads otherwise spin after each run and slow whatever runs next
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if not optimize:  # a file ONNX Runtime optimised already: load it as it is
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=providers or ["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def __call__(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> Any:
        feed = {name: t.detach().cpu().numpy() for name, t in zip(self.input_names, args)}
        feed.update({k: v.detach().cpu().numpy() for k, v in kwargs.items()})
        outs = [torch.from_numpy(o) for o in self.session.run(None, feed)]
        return outs[0] if len(outs) == 1 else tuple(outs)


def _load_onnx(spec: str) -> LoadedModel:
    p = _existing(spec)
    try:
        model = OnnxModel(p)
    except MissingDependencyError:
        raise
    except Exception as exc:
        raise SpecError(f"'{spec}' could not be loaded by onnxruntime: {first_line(exc)}") from exc
    return LoadedModel(model, None, spec, "onnx")
