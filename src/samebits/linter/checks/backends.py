"""SB102 unknown-backend-flag, SB103 benchmark-with-determinism, SB108, SB109: global flags."""

from __future__ import annotations

import ast
import difflib
import types
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from samebits.linter.checks.common import FileContext, Finding


@lru_cache(maxsize=None)
def _backend_names(path: str) -> tuple[bool, frozenset[str]] | None:
    """For ``torch.backends.cudnn``: (is a module, the names it has); ``None`` if unknown here."""
    try:
        import importlib

        obj: Any = importlib.import_module("torch.backends")
        for part in path.split(".")[2:]:
            obj = getattr(obj, part)
    except Exception:
        return None
    names = set(dir(obj)) | set(dir(type(obj)))
    inner = getattr(obj, "m", None)  # torch's PropModule wraps the real module in .m
    if isinstance(inner, types.ModuleType):
        names |= set(dir(inner))
    return isinstance(obj, types.ModuleType), frozenset(n for n in names if not n.startswith("__"))


def unknown_backend_flag(ctx: FileContext) -> Iterator[Finding]:
    for node, name, _ in ctx.attribute_assignments():
        if not name.startswith("torch.backends.") or name.count(".") < 3:
            continue
        owner, _, attr = name.rpartition(".")
        known = _backend_names(owner)
        if known is None:
            continue
        is_module, names = known
        if is_module and attr not in names:
            close = difflib.get_close_matches(attr, sorted(names), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            yield ctx.finding(node, "SB102", f"{owner} has no flag '{attr}': the assignment sets nothing{hint}")


def benchmark_with_determinism(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.asks_for_determinism():
        return
    for node, name, value in ctx.attribute_assignments():
        if name.endswith("cudnn.benchmark") and isinstance(value, ast.Constant) and value.value is True:
            yield ctx.finding(node, "SB103")


def deterministic_warn_only(ctx: FileContext) -> Iterator[Finding]:
    for call in ctx.calls:
        if ctx.dotted(call.func) == "torch.use_deterministic_algorithms":
            if any(
                k.arg == "warn_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in call.keywords
            ):
                yield ctx.finding(call, "SB108")


def tf32_with_determinism(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.asks_for_determinism():
        return
    for node, name, value in ctx.attribute_assignments():
        if name.endswith(".allow_tf32") and isinstance(value, ast.Constant) and value.value is True:
            yield ctx.finding(node, "SB109")
        if name.endswith(".fp32_precision") and isinstance(value, ast.Constant) and value.value in ("tf32", "bf16"):
            yield ctx.finding(node, "SB109")
    for call in ctx.calls:
        if ctx.dotted(call.func) == "torch.set_float32_matmul_precision" and call.args:
            if isinstance(call.args[0], ast.Constant) and call.args[0].value in ("high", "medium"):
                yield ctx.finding(call, "SB109")


CHECKS = (
    ("SB102", unknown_backend_flag),
    ("SB103", benchmark_with_determinism),
    ("SB108", deterministic_warn_only),
    ("SB109", tf32_with_determinism),
)
