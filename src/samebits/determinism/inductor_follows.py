"""``torch.use_deterministic_algorithms`` without importing Inductor.

torch's function imports ``torch._inductor.config`` to set its ``deterministic`` flag beside the
C flag: the import pulls in Dynamo and Inductor, 0.85 s (measured on torch 2.13, as long as
importing torch itself), which every samebits process that enters the deterministic profile
paid (each ``predict``, ``serve``, each child of ``check``). Here the C flag is set directly and
Inductor's flag is set as torch sets it: at once where Inductor is loaded already, else by an
import hook the moment it is loaded (to the C flag's value then). Where torch lacks the private
setter, torch's own function runs. Inductor keeps its config in context variables (torch 2.13):
as with torch's function, the value holds in the thread that set it, here the thread that entered
the profile or, where Inductor is loaded later, the thread that loads it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

import torch

CONFIG = "torch._inductor.config"
_installed = threading.Lock()


def set_deterministic_algorithms(mode: bool, warn_only: bool = False) -> None:
    """What ``torch.use_deterministic_algorithms(mode, warn_only=warn_only)`` does, without
    loading Inductor to do it."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    setter(mode, warn_only=warn_only)
    _follow_on_import()  # first: an import starting from now on is followed
    if CONFIG in sys.modules:  # loaded, or loading in another thread: wait for it, as `import` does
        setattr(importlib.import_module(CONFIG), "deterministic", mode)


def _follow_on_import() -> None:
    with _installed:
        if not any(isinstance(f, _Follow) for f in sys.meta_path):
            sys.meta_path.insert(0, _Follow())


_asking = threading.local()  # this thread is asking the other finders (a finder that asks every
# other finder in turn, as this one does, would otherwise send the question back here forever)


class _Follow(importlib.abc.MetaPathFinder):
    """Finds Inductor's config as the finders after it do, with a loader that sets its
    ``deterministic`` flag to torch's flag once the module has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != CONFIG or getattr(_asking, "now", False):
            return None
        _asking.now = True
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    if isinstance(spec.loader, importlib.abc.Loader):
                        spec.loader = _Following(spec.loader)
                    return spec
            return None
        finally:
            _asking.now = False


class _Following(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        setattr(module, "deterministic", torch.are_deterministic_algorithms_enabled())

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the real loader
        if name == "loader":  # not set yet (a copy or an unpickling): no lookup through itself
            raise AttributeError(name)
        return getattr(self.loader, name)
