"""The backends that run torch's own kernels: eager, TorchScript, torch.export, torch.compile."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import torch

from samebits.models.inputs import ModelInputs
from samebits.runtime.backends.base import Backend, Built


class Eager(Backend):
    name = "eager"

    def build(
        self,
        model: Any,
        example: ModelInputs,
        folder: Path,
        key: str,
        threads: int | None,
        spinning: bool,
        dynamic_batch: bool,
    ) -> Built:
        return Built(model)


class TorchScript(Backend):
    name = "torchscript"
    keyword_inputs = False

    def build(
        self,
        model: Any,
        example: ModelInputs,
        folder: Path,
        key: str,
        threads: int | None,
        spinning: bool,
        dynamic_batch: bool,
    ) -> Built:
        from samebits.runtime.cache import build_once

        path = folder / f"torchscript-{key}.pt"
        built = build_once(
            path, lambda tmp: torch.jit.trace(model, example.args, check_trace=False).save(str(tmp)), code=True
        )  # TorchScript can unpickle code
        return Built(torch.jit.load(str(path)), path, built)


class Export(Backend):
    name = "export"

    def build(
        self,
        model: Any,
        example: ModelInputs,
        folder: Path,
        key: str,
        threads: int | None,
        spinning: bool,
        dynamic_batch: bool,
    ) -> Built:
        from samebits.models.pt2_archive import load_exported
        from samebits.runtime.cache import build_once

        path = folder / f"export-{key}.pt2"
        built = build_once(
            path, lambda tmp: torch.export.save(torch.export.export(model, example.args, example.kwargs), str(tmp))
        )
        return Built(load_exported(path).module(), path, built)


class Compile(Backend):
    """torch.compile, compiled now on the example (one static shape), with inductor's cache in
    ``folder/inductor`` so that every process that compiles the same graph finds the same
    kernels (compiled code: only from a folder no one else can write). Not measured by
    ``backend="auto"`` unless named: it builds one kernel set per batch shape."""

    name = "compile"
    auto = False

    def unavailable(self, device: str) -> str | None:
        if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
            return "torch.compile on CPU needs a C++ compiler at run time, and none is on PATH"
        return super().unavailable(device)

    def build(
        self,
        model: Any,
        example: ModelInputs,
        folder: Path,
        key: str,
        threads: int | None,
        spinning: bool,
        dynamic_batch: bool,
    ) -> Built:
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
