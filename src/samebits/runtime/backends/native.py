"""The backends that run torch's own kernels: eager, TorchScript, torch.export, torch.compile."""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

import torch

from samebits.runtime.backends.base import Backend, Built, BuildJob


class Eager(Backend):
    name = "eager"
    eager_dispatch = True

    def build(self, job: BuildJob) -> Built:
        return Built(job.model)


class TorchScript(Backend):
    name = "torchscript"
    keyword_inputs = False

    def build(self, job: BuildJob) -> Built:
        from samebits.runtime.cache import build_once

        path = job.folder / f"torchscript-{job.key}.pt"
        built = build_once(
            path, lambda tmp: torch.jit.trace(job.model, job.example.args, check_trace=False).save(str(tmp)), code=True
        )  # TorchScript can unpickle code
        return Built(torch.jit.load(str(path)), path, built)


class Export(Backend):
    name = "export"

    def build(self, job: BuildJob) -> Built:
        from samebits.models.pt2_archive import load_exported
        from samebits.runtime.cache import build_once

        path, example = job.folder / f"export-{job.key}.pt2", job.example
        built = build_once(
            path,
            lambda tmp: torch.export.save(
                torch.export.export(job.module(self.name), example.args, example.kwargs), str(tmp)
            ),
            code=True,  # a program is loaded and run: only from a folder no one else can write
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

    def build(self, job: BuildJob) -> Built:
        from samebits.runtime.cache import ArtifactCache, CacheError

        store = ArtifactCache(job.folder)
        if reason := store.untrusted_reason():
            raise CacheError(
                f"{reason}: samebits does not load inductor's compiled kernels from it; chmod go-w it or pass another cache_dir"
            )
        cache = store.record_folder("inductor")
        compiled = torch.compile(job.model, dynamic=False)
        try:
            from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

            cache_dir: contextlib.AbstractContextManager[Any] = temporary_cache_dir(str(cache))
        except ImportError:  # private API: without it the compile cache stays where torch puts it
            cache_dir = contextlib.nullcontext()
        with cache_dir, torch.inference_mode():
            compiled(*job.example.args, **job.example.kwargs)
        return Built(compiled, cache)
