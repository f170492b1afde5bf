"""SB102 unknown-backend-flag, SB103 benchmark-with-determinism, SB108, SB109: global flags."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator

from samebits.linter.checks.backend_flags import FLAGS
from samebits.linter.checks.common import FileContext, Finding, seeds_every_rng
from samebits.linter.checks.models import same_scope


def _backend_names(path: str) -> frozenset[str] | None:
    """The names of the ``torch.backends`` module ``path`` (``torch.backends.cudnn``) from the
    table shipped with samebits (checks/backend_flags.py: no torch import); ``None`` where
    ``path`` is no module there (``torch.backends.cuda.matmul`` is an object that raises itself)."""
    return FLAGS.get(path.removeprefix("torch.backends.")) if path.startswith("torch.backends.") else None


def unknown_backend_flag(ctx: FileContext) -> Iterator[Finding]:
    for node, name, _ in ctx.attribute_assignments():
        if not name.startswith("torch.backends.") or name.count(".") < 3:
            continue
        owner, _, attr = name.rpartition(".")
        names = _backend_names(owner)
        if names is not None and attr not in names:
            close = difflib.get_close_matches(attr, sorted(names), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            yield ctx.finding(node, "SB102", f"{owner} has no flag '{attr}': the assignment sets nothing{hint}")


def benchmark_with_determinism(ctx: FileContext) -> Iterator[Finding]:
    asked = ctx.asks_for_determinism()
    for node, name, value in ctx.attribute_assignments():
        if not (name.endswith("cudnn.benchmark") and isinstance(value, ast.Constant) and value.value is True):
            continue
        if asked:
            yield ctx.finding(node, "SB103")
        elif (helper := _seeding_function(ctx, node)) is not None:
            yield ctx.finding(
                node,
                "SB103",
                f"cudnn.benchmark = True inside {helper}(), which seeds every RNG for runs that repeat: each run still times and picks its own convolution kernels",
            )


def _seeding_function(ctx: FileContext, node: ast.AST) -> str | None:
    """The name of the function around ``node`` when it seeds every RNG (a seed-everything helper)."""
    function = next((p for p in ctx.ancestors(node) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None:
        return None
    names = {n for c in same_scope(function) if isinstance(c, ast.Call) and (n := ctx.dotted(c.func))}
    return function.name if seeds_every_rng(names) else None


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
