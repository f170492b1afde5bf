"""Packages that are also functions: ``samebits.check(...)``, ``samebits.lint(...)``, ``samebits.doctor(...)``.

Importing ``samebits.check.report`` makes the attribute ``samebits.check`` the package, so the
function and the package must be one object: the package's module class gets a ``__call__``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Make the module ``module_name`` callable as ``function`` (its docstring shown by ``help``)."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    module = sys.modules[module_name]
    module.__class__ = CallableModule
    module.__call__.__func__.__doc__ = function.__doc__  # type: ignore[attr-defined]
