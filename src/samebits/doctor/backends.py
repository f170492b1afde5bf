"""Try the faster backends that are installed: each timed briefly against eager, with its bits."""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import torch

from samebits.models.inputs import ModelInputs
from samebits.tensors.compare import compare

BACKENDS = ("torchscript", "onnxruntime", "compile")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The ONNX exporter reports its steps on stdout and warns through logging: keep reports clean."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def build_backend(name: str, model: Any, inputs: ModelInputs, folder: Path) -> Callable[[], Any] | str:
    """A zero-argument runner of ``model`` on ``inputs`` through ``name``, or why it is unavailable."""
    if inputs.kwargs:
        return "keyword inputs are not supported by this probe"
    if name == "torchscript":
        traced = torch.jit.trace(model, inputs.args, check_trace=False)
        traced = torch.jit.freeze(traced.eval()) if not traced.training else traced
        return lambda: traced(*inputs.args)
    if name == "onnxruntime":
        try:
            import onnxruntime  # noqa: F401
            import onnxscript  # noqa: F401
        except ImportError:
            return "onnxruntime/onnxscript are not installed (pip install 'samebits[onnx]')"
        from samebits.models.spec import OnnxModel

        path = folder / "model.onnx"
        with _quiet():
            torch.onnx.export(model, inputs.args, str(path), dynamo=True, verbose=False)
        session = OnnxModel(path, threads=torch.get_num_threads(), spinning=False)  # timed beside eager
        return lambda: session(*inputs.args)
    if name == "compile":
        if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
            return "torch.compile on CPU needs a C++ compiler at run time, and none is on PATH"
        compiled = torch.compile(model)
        return lambda: compiled(*inputs.args)
    return f"unknown backend '{name}'; choose from {', '.join(BACKENDS)}"


def try_backends(model: Any, inputs: ModelInputs, names: tuple[str, ...], eager: Callable[[], Any], timer: Callable[..., dict[str, float]]) -> list[dict[str, Any]]:
    """For each backend: speed relative to eager, and whether its outputs have eager's bits."""
    results = []
    reference = eager()
    with tempfile.TemporaryDirectory(prefix="samebits-doctor-") as tmp:
        for name in names:
            entry: dict[str, Any] = {"backend": name}
            try:
                with torch.inference_mode():
                    runner = build_backend(name, model, inputs, Path(tmp))
                    if isinstance(runner, str):
                        entry.update(status="skipped", reason=runner)
                    else:
                        out = runner()
                        times = timer({"eager": eager, name: runner})
                        result = compare(reference, out)
                        worst = result.first_difference()
                        entry.update(
                            status="ran",
                            speedup=round(times["eager"] / times[name], 2),
                            identical=result.identical,
                            max_abs=worst.max_abs if worst else 0.0,
                        )
            except Exception as exc:
                text = str(exc).strip().splitlines()
                entry.update(status="error", reason=f"{type(exc).__name__}: {text[0] if text else ''}")
            results.append(entry)
    return results
