"""One project file's facts for the project index (linter/project.py), as plain JSON data: its
classes (bases, methods), functions, module-level instances and imports, and per function what
it does with its parameters (evals them, runs them, under no_grad or not). From the AST only."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from samebits.linter.checks import grad
from samebits.linter.checks.common import FileContext
from samebits.linter.checks.inference import resizes_to_fixed_size
from samebits.linter.checks.models import FUNCTIONS, INFERENCE_METHODS, binds_eval, chain_base, is_eval_call, same_scope

Summary = dict[str, Any]  # JSON: see summarize()
SUMMARY_FORMAT = 6  # bump when summarize()'s output changes: cached summaries of another format are re-made


def summarize(tree: ast.Module, source: str = "") -> Summary:
    """``{"classes", "functions", "instances", "imports", "evaluated", "no_grad_calls"}`` of one file."""
    ctx = FileContext(Path("<index>"), "<index>", source, tree)
    classes = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        methods = {f.name: _function(ctx, f) for f in cls.body if isinstance(f, FUNCTIONS)}
        init = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == "__init__"), None)
        if init is not None:
            methods["__init__"]["evals"] = sorted(set(methods["__init__"]["evals"]) | _stored_and_evaluated(cls, init))
        classes[cls.name] = {
            "line": cls.lineno,
            "bases": [ctx.dotted(b) or "" for b in cls.bases],
            "self_eval": init is not None and any(_evaluated_name(n) == "self" for n in ast.walk(init)),
            "methods": methods,
        }
    return {
        "classes": classes,
        "functions": {f.name: _function(ctx, f) for f in tree.body if isinstance(f, FUNCTIONS)},
        "instances": _instances(ctx, tree),
        "imports": dict(ctx.aliases),
        "evaluated": sorted({n for node in ctx.nodes if (n := _evaluated_name(node))}),  # model.eval() anywhere
        "no_grad_calls": sorted(
            {n for c in ctx.calls if ctx.under_no_grad(c) and (n := ctx.dotted(c.func)) and "(" not in n}
        ),
    }


def _evaluated(node: ast.AST) -> ast.AST | None:
    """The object ``node`` puts in eval mode (``x`` of ``x.to(d).eval()``, ``x.train(False)``)."""
    return chain_base(node.func.value) if is_eval_call(node) else None  # type: ignore[attr-defined]


def _evaluated_name(node: ast.AST) -> str | None:
    base = _evaluated(node)
    return base.id if isinstance(base, ast.Name) else None


def _stored_and_evaluated(cls: ast.ClassDef, init: ast.AST) -> set[str]:
    """Parameters of ``__init__`` stored as ``self.x = param`` whose ``self.x`` is eval'd in the class."""
    args = init.args  # type: ignore[attr-defined]
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    stored: dict[str, set[str]] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    stored.setdefault(t.attr, set()).add(node.value.id)
    out: set[str] = set()
    for node in ast.walk(cls):
        base = _evaluated(node)
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self":
            out |= stored.get(base.attr, set())
    return out


def _callee(ctx: FileContext, func: ast.AST) -> str:
    """How a call names its target: ``pkg.f`` (aliases resolved), ``self.m``, or ``?.m`` for a
    method of an object whose class is not known here."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return f"self.{func.attr}"
    name = ctx.dotted(func)
    if name and "(" not in name:
        return name
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
        return "|".join(_registry(ctx, func.value.id))
    return f"?.{func.attr}" if isinstance(func, ast.Attribute) else ""


def _registry(ctx: FileContext, name: str) -> list[str]:
    """The classes of a module-level registry ``NAME = {"key": Cls, ...}`` (every value a name):
    ``NAME[key](...)`` makes an instance of one of them."""
    for stmt in ctx.tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            and isinstance(stmt.value, ast.Dict)
            and stmt.value.values
        ):
            values = [ctx.dotted(v) for v in stmt.value.values]
            return [v for v in values if v] if all(values) else []
    return []


def _function(ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Summary:
    args = function.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    params = set(positional) | {a.arg for a in args.kwonlyargs}
    evals: set[str] = set()
    no_grad: set[str] = set()
    forwards: set[str] = set()
    calls: set[str] = set()
    passes: list[list[Any]] = []
    body_calls: list[ast.Call] = []
    for node in (n for stmt in function.body for n in same_scope(stmt)):
        if not isinstance(node, ast.Call):
            continue
        body_calls.append(node)
        if evaluated := _evaluated_name(node):
            evals.add(evaluated)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("forward", *INFERENCE_METHODS):
            func = func.value
        if isinstance(func, ast.Name) and func.id in params:
            calls.add(func.id)
            if not ctx.grad_chosen(node):
                forwards.add(func.id)
        used = [a for a in node.args if isinstance(a, ast.Name) and a.id in params]
        used += [k.value for k in node.keywords if isinstance(k.value, ast.Name) and k.value.id in params]
        if ctx.under_no_grad(node):
            no_grad.update(n.id for n in [*used, func] if isinstance(n, ast.Name) and n.id in params)
        callee = _callee(ctx, node.func)
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Name) and a.id in params and callee:
                passes.append([a.id, callee, i])
        for k in node.keywords:
            if isinstance(k.value, ast.Name) and k.value.id in params and callee and k.arg:
                passes.append([k.value.id, callee, k.arg])
    returns = _returns(ctx, function)
    return {
        "line": function.lineno,
        "positional": positional,
        "params": sorted(params),
        "evals": sorted(evals & params),
        "no_grad": sorted(params if any(ctx._is_no_grad(d) for d in function.decorator_list) else no_grad),
        "grad_off": grad.turns_grad_off(ctx, function),
        "forwards": sorted(forwards),
        "calls": sorted(calls),
        "passes": passes,
        "returns": returns,
        "fixed_size": resizes_to_fixed_size(ctx, body_calls),
    }


def _returns(ctx: FileContext, function: ast.AST) -> list[list[Any]]:
    """Per position of the (last) returned value: ``[callee that made it, returned in eval mode]``."""
    made: dict[str, tuple[str, bool]] = {}
    evaluated: set[str] = set()
    result: list[list[Any]] = []
    statements = sorted(
        (n for stmt in function.body for n in same_scope(stmt)),  # type: ignore[attr-defined]
        key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)),
    )
    for node in statements:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            base = chain_base(node.value)
            name = node.targets[0].id
            if isinstance(base, ast.Call):
                made[name] = (_callee(ctx, base.func), binds_eval(node.value))
                evaluated.discard(name)
            elif isinstance(base, ast.Name) and base.id in made:
                made[name] = (made[base.id][0], made[base.id][1] or binds_eval(node.value))
        elif evaluated_here := _evaluated_name(node):
            evaluated.add(evaluated_here)
        elif isinstance(node, ast.Return) and node.value is not None:
            parts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            result = []
            for part in parts:
                base = chain_base(part)
                if isinstance(base, ast.Call):
                    result.append([_callee(ctx, base.func), binds_eval(part)])
                elif isinstance(base, ast.Name) and base.id in made:
                    callee, ev = made[base.id]
                    result.append([callee, ev or binds_eval(part) or base.id in evaluated])
                else:
                    result.append(["", False])
    return result


def _instances(ctx: FileContext, tree: ast.Module) -> Summary:
    """Module-level ``name = Callee(...)``: the callee, its line, and whether it is eval'd at
    module level (``model = Net().eval()``, or ``model.eval()`` later in the module)."""
    top = [s for s in tree.body if not isinstance(s, (*FUNCTIONS, ast.ClassDef))]
    statements = [n for s in top for n in same_scope(s)]
    out = {}
    for node in statements:
        if isinstance(node, ast.Assign) and isinstance(base := chain_base(node.value), ast.Call):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = {"line": node.lineno, "call": _callee(ctx, base.func), "eval": binds_eval(node.value)}
    for node in statements:
        if (name := _evaluated_name(node)) in out:
            out[name]["eval"] = True
    return out
