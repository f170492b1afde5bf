"""SB401 unsafe-torch-load, SB402 pickle-load."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import FileContext, Finding, Fixer
from samebits.linter.checks.edits import Edit, Fix


def unsafe_torch_load(ctx: FileContext) -> Iterator[Finding]:
    old = None
    for call in ctx.calls:
        if ctx.dotted(call.func) != "torch.load":
            continue
        weights_only = next((k.value for k in call.keywords if k.arg == "weights_only"), None)
        if isinstance(weights_only, ast.Constant) and weights_only.value is False:
            yield ctx.finding(call, "SB401", "torch.load(..., weights_only=False) unpickles whatever the file holds")
            continue
        if weights_only is not None or any(k.arg is None for k in call.keywords):
            continue
        old = ctx.targets_old_torch if old is None else old
        if old:
            yield ctx.finding(
                call,
                "SB401",
                "bare torch.load in code written for torch < 0.4 (Variable, volatile=), where the default unpickles anything; pass weights_only=True",
            )
        elif ctx.project_min_torch is not None and ctx.project_min_torch < (2, 6):
            low = ".".join(map(str, ctx.project_min_torch))
            yield ctx.finding(
                call,
                "SB401",
                f"bare torch.load: this project supports torch {low}, where the default unpickles anything; pass weights_only=True",
            )


WEIGHTS_ONLY_SINCE = (1, 13)  # the first torch whose torch.load takes weights_only


def fix_unsafe_torch_load(ctx: FileContext, call: ast.AST) -> Fix | str:
    """SB401's fix: ``weights_only=True``, only where the loaded object is provably a state dict."""
    assert isinstance(call, ast.Call)
    if len(call.args) > 2 or any(k.arg == "pickle_module" for k in call.keywords):
        return "it passes a pickle_module, which weights_only=True refuses"
    flag = next((k.value for k in call.keywords if k.arg == "weights_only"), None)
    if flag is None and ctx.targets_old_torch:
        return "the code is written for torch < 0.4 (Variable, volatile=), whose torch.load has no weights_only"
    if flag is None and ctx.project_min_torch is not None and ctx.project_min_torch < WEIGHTS_ONLY_SINCE:
        low = ".".join(map(str, ctx.project_min_torch))
        return f"this project supports torch {low}, whose torch.load has no weights_only (torch >= 1.13 has)"
    why = _not_a_state_dict(ctx, call)
    if why:
        return why
    lines = ctx.lines
    if flag is not None:
        return Fix("weights_only=False -> True", (Edit(*lines.start(flag), *lines.end(flag), "True"),))
    last = max((*call.args, *(k.value for k in call.keywords)), key=lambda n: (n.end_lineno, n.end_col_offset))
    end = lines.end(last)
    return Fix("pass weights_only=True", (Edit(*end, *end, ", weights_only=True"),))


def _not_a_state_dict(ctx: FileContext, call: ast.Call) -> str:
    """Why ``call``'s result is not shown to be a state dict ("" where it is): it must go straight
    into a strict ``load_state_dict(...)``, directly or through a name used for nothing else."""
    parent = ctx.parents.get(call)
    if _state_dict_argument(parent, call):
        return ""
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0]
        scope = next(
            (p for p in ctx.ancestors(call) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))), ctx.tree
        )
        uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name.id and n is not name]
        other = next((u for u in uses if not _state_dict_argument(ctx.parents.get(u), u)), None)
        if uses and other is None:
            return ""
        if other is not None:
            return f"{name.id} is used for more than a strict load_state_dict (line {other.lineno}): the file may hold other objects than tensors, which weights_only=True refuses"
    return "the loaded object is not shown to be a state dict (it does not go straight into load_state_dict): weights_only=True would refuse a pickled model or other objects in it"


def _state_dict_argument(parent: ast.AST | None, node: ast.AST) -> bool:
    """``node`` is the state dict of a strict ``x.load_state_dict(node)`` (``strict=False`` ignores
    entries that are not the model's, which could be any pickled object)."""
    if not (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)):
        return False
    if parent.func.attr != "load_state_dict":
        return False
    given = parent.args[0] if parent.args else next((k.value for k in parent.keywords if k.arg == "state_dict"), None)
    strict = (
        parent.args[1] if len(parent.args) > 1 else next((k.value for k in parent.keywords if k.arg == "strict"), None)
    )
    return given is node and (strict is None or (isinstance(strict, ast.Constant) and strict.value is True))


FIXES: dict[str, Fixer] = {"SB401": fix_unsafe_torch_load}


def pickle_load(ctx: FileContext) -> Iterator[Finding]:
    for call in ctx.calls:
        name = ctx.dotted(call.func) or ""
        if name in (
            "pickle.load",
            "pickle.loads",
            "dill.load",
            "dill.loads",
            "joblib.load",
            "cloudpickle.load",
            "cloudpickle.loads",
        ):
            yield ctx.finding(call, "SB402", f"{name} runs the code inside the data it loads")


CHECKS = (("SB401", unsafe_torch_load), ("SB402", pickle_load))
