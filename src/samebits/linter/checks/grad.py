"""Grad mode as the source sets it: ``with`` blocks, decorators of any enclosing function, and
bare statements (``torch.set_grad_enabled(False)``, ``torch.no_grad().__enter__()``) earlier in
an enclosing body. ``False``: grad off; ``True``: turned on deliberately (``enable_grad`` for
``autograd.grad``); ``None``: torch's default, on, chosen by nobody."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samebits.linter.checks.common import FileContext

OFF_NAMES = ("no_grad", "inference_mode")  # torch's, and project decorators such as smart_inference_mode
ON_NAMES = ("enable_grad",)
SET_NAMES = ("set_grad_enabled", "_set_grad_enabled")


def _flag(call: ast.Call, keyword: str) -> bool | None:
    """The constant boolean of a call's first argument (or its ``keyword``), else None."""
    value = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == keyword), None)
    if isinstance(value, ast.Constant) and isinstance(value.value, (bool, int)):
        return bool(value.value)
    return None


def switch(ctx: FileContext, expr: ast.AST) -> bool | None:
    """What a context manager or decorator does to grad mode (the module docstring's values)."""
    call = expr if isinstance(expr, ast.Call) else None
    last = (ctx.dotted(call.func if call is not None else expr) or "").rsplit(".", 1)[-1]
    if last in SET_NAMES:
        flag = _flag(call, "mode") if call is not None else None
        return None if flag is None else flag
    if last.endswith(OFF_NAMES):
        if last.endswith("inference_mode") and call is not None and _flag(call, "mode") is False:
            return None  # inference_mode(False): grad mode as it was
        return False
    if last in ON_NAMES:
        return True
    return None


def statement_switch(ctx: FileContext, stmt: ast.stmt) -> bool | None:
    """What a bare statement does to grad mode from there on: ``torch.set_grad_enabled(False)``
    (it switches when called), ``torch.no_grad().__enter__()``. A bare ``torch.no_grad()`` does
    nothing (only entering it does), so it is not a switch."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if isinstance(call.func, ast.Attribute) and call.func.attr == "__enter__":
        return switch(ctx, call.func.value) if isinstance(call.func.value, ast.Call) else None
    if (ctx.dotted(call.func) or "").rsplit(".", 1)[-1] in SET_NAMES:
        return switch(ctx, call)
    return None


def turns_grad_off(ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The function runs its whole body with grad off: decorated with no_grad/inference_mode, or
    its body (docstring aside) one ``with torch.no_grad():`` block."""
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return any(switch(ctx, d) is False for d in function.decorator_list) or (
        len(body) == 1
        and isinstance(body[0], ast.With)
        and any(switch(ctx, i.context_expr) is False for i in body[0].items)
    )


def _bodies(parent: ast.AST) -> list[list[ast.stmt]]:
    return [b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list)]


def _set_before(ctx: FileContext, parent: ast.AST, child: ast.AST) -> tuple[bool, bool | None]:
    """Whether the bare switches of ``parent``'s body set grad mode before its statement ``child``,
    and to what: off, or back to the default (a bare ``set_grad_enabled(True)`` restores it, no
    deliberate choice). A function or class at a module's top level runs when called: after the
    whole script's setup."""
    for body in _bodies(parent):
        if child not in body:
            continue
        whole = isinstance(parent, ast.Module) and isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        )
        seen, mode = False, None
        for stmt in body if whole else body[: body.index(child)]:
            found = statement_switch(ctx, stmt)
            if found is not None:
                seen, mode = True, (False if found is False else None)
        return seen, mode
    return False, None


def mode(ctx: FileContext, node: ast.AST) -> bool | None:
    """The innermost grad mode the source sets where ``node`` runs (the module docstring's values)."""
    child = node
    for parent in ctx.ancestors(node):
        seen, set_here = _set_before(ctx, parent, child)  # a bare switch is inside its with block or function
        if seen:
            return set_here
        if isinstance(parent, (ast.With, ast.AsyncWith)):
            found = [m for m in (switch(ctx, i.context_expr) for i in parent.items) if m is not None]
            if found:
                return found[-1]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = [m for m in (switch(ctx, d) for d in parent.decorator_list) if m is not None]
            if found:
                return found[0]
        child = parent
    return None
