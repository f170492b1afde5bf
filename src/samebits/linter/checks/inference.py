"""SB107 missing-eval, SB201 per-sample-loop, SB202 discarded-to-result, SB301
inference-without-no-grad, SB302 outputs-kept-with-grad: inference done wrong."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import TENSOR_NAME, FileContext, Finding

MOVES = ("to", "cuda", "cpu", "half", "float", "double", "bfloat16", "contiguous", "long", "int", "pin_memory")
DETACHED = ("detach", "item", "tolist", "numpy", "argmax", "argmin")


def _is_tensorish(ctx: FileContext, node: ast.AST) -> bool:
    name = ctx.name_of(node)
    if name is not None:
        if name in ctx.tensors:
            return True
        return name not in ctx.models and bool(TENSOR_NAME.match(name.removeprefix("self.")))
    if isinstance(node, ast.Subscript):
        return _is_tensorish(ctx, node.value)
    if isinstance(node, ast.Call):
        from samebits.linter.checks.common import TENSOR_FACTORIES

        return (ctx.dotted(node.func) or "") in TENSOR_FACTORIES
    return False


def discarded_to_result(ctx: FileContext) -> Iterator[Finding]:
    for node in ast.walk(ctx.tree):
        if not (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
        ):
            continue
        func = node.value.func
        if func.attr in MOVES and _is_tensorish(ctx, func.value):
            target = ast.unparse(func.value)
            yield ctx.finding(
                node,
                "SB202",
                f"{target}.{func.attr}(...) returns a new tensor that is thrown away: {target} stays as it was; write {target} = {target}.{func.attr}(...)",
            )


def _in_forward(ctx: FileContext, node: ast.AST) -> bool:
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.name in (
            "forward",
            "__call__",
            "training_step",
            "validation_step",
            "test_step",
            "predict_step",
        ):
            return True
        if isinstance(parent, ast.ClassDef) and parent.name in ctx.module_classes:
            return True
    return False


def _functions_called_without_grad(ctx: FileContext) -> set[str]:
    names = set()
    for call in ctx.calls:
        if ctx.under_no_grad(call) and isinstance(call.func, ast.Name):
            names.add(call.func.id)
    return names


def _enclosing_function(ctx: FileContext, node: ast.AST) -> str | None:
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return parent.name
    return None


def _model_is_parameter(ctx: FileContext, call: ast.AST) -> bool:
    """``def predict(model, x): return model(x)``: grad mode is the caller's choice."""
    if not isinstance(call, ast.Call):
        return False
    name = ctx.name_of(call.func)
    for parent in ctx.ancestors(call):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return name in {a.arg for a in parent.args.args + parent.args.kwonlyargs + parent.args.posonlyargs}
    return False


def _grad_free(ctx: FileContext, node: ast.AST, safe_functions: set[str]) -> bool:
    return (
        ctx.under_no_grad(node)
        or _in_forward(ctx, node)
        or _enclosing_function(ctx, node) in safe_functions
        or _model_is_parameter(ctx, node)
    )


def inference_without_no_grad(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.inference_file:
        return
    safe = _functions_called_without_grad(ctx)
    for call in ctx.calls:
        if ctx.is_model_call(call) and not _grad_free(ctx, call, safe):
            yield ctx.finding(
                call,
                "SB301",
                f"{ast.unparse(call.func)}(...) runs for inference with grad mode on: wrap it in torch.inference_mode()",
            )


def _evaluated(ctx: FileContext) -> set[str]:
    names = set()
    for call in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and (
            func.attr == "eval"
            or (
                func.attr == "train"
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value is False
            )
        ):
            inner = func.value
            while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                inner = inner.func.value
            name = ctx.name_of(inner)
            if name:
                names.add(name)
            parent = ctx.parents.get(call)
            while isinstance(parent, (ast.Attribute, ast.Call)):
                parent = ctx.parents.get(parent)
            if isinstance(parent, ast.Assign):  # model = Net().eval()
                names.update(n for n in (ctx.name_of(t) for t in parent.targets) if n)
    return names


def missing_eval(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.inference_file:
        return
    evaluated = _evaluated(ctx)
    if "self" in evaluated:
        return  # a module that puts itself in eval mode
    reported = set()
    for call in ctx.calls:
        if not ctx.is_model_call(call):
            continue
        func = call.func.value if isinstance(call.func, ast.Attribute) and call.func.attr == "forward" else call.func
        name = ctx.name_of(func)
        if name in ctx.bound_models and name not in evaluated and name not in reported and not _in_forward(ctx, call):
            reported.add(name)
            yield ctx.finding(
                call,
                "SB107",
                f"{name} is used for inference but never put in eval mode: call {name}.eval() after loading",
            )


def _single_item(ctx: FileContext, arg: ast.AST) -> bool:
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr in ("unsqueeze", "unsqueeze_")
    ):
        return bool(arg.args) and isinstance(arg.args[0], ast.Constant) and arg.args[0].value == 0
    if isinstance(arg, ast.Call) and ctx.dotted(arg.func) == "torch.unsqueeze":
        return len(arg.args) > 1 and isinstance(arg.args[1], ast.Constant) and arg.args[1].value == 0
    if isinstance(arg, ast.Subscript):
        index = arg.slice
        first = index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index
        if isinstance(first, ast.Constant) and first.value is None:
            return True  # x[None], x[None, ...]
        if isinstance(first, ast.Slice) and first.lower is not None and isinstance(first.upper, ast.BinOp):
            upper = first.upper  # x[i:i+1]
            return (
                isinstance(upper.op, ast.Add)
                and ast.dump(upper.left) == ast.dump(first.lower)
                and isinstance(upper.right, ast.Constant)
                and upper.right.value == 1
            )
    return False


def per_sample_loop(ctx: FileContext) -> Iterator[Finding]:
    for call in ctx.calls:
        if (
            ctx.is_model_call(call)
            and call.args
            and _single_item(ctx, call.args[0])
            and ctx.in_loop(call) is not None
            and not _in_forward(ctx, call)
        ):
            yield ctx.finding(
                call,
                "SB201",
                f"{ast.unparse(call.func)} is called on one sample per iteration ({ast.unparse(call.args[0])}): batch the samples",
            )


def _carries_graph(ctx: FileContext, expr: ast.AST, tainted: set[str]) -> bool:
    """Whether ``expr`` is (derived from) a model output that still carries its graph."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in DETACHED:
        return False
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("float", "int", "bool", "len", "str")
    ):
        return False
    if ctx.is_model_call(expr):
        return True
    name = ctx.name_of(expr)
    if name is not None:
        return name in tainted
    if isinstance(expr, (ast.Call, ast.Attribute)) and isinstance(getattr(expr, "func", expr), ast.Attribute):
        inner = expr.func.value if isinstance(expr, ast.Call) else expr.value
        return _carries_graph(ctx, inner, tainted)
    if isinstance(expr, (ast.BinOp, ast.Subscript)):
        parts = [expr.left, expr.right] if isinstance(expr, ast.BinOp) else [expr.value]
        return any(_carries_graph(ctx, p, tainted) for p in parts)
    if isinstance(expr, ast.Call) and _propagates(ctx, expr):
        return any(_carries_graph(ctx, a, tainted) for a in expr.args)
    return False


def _propagates(ctx: FileContext, call: ast.Call) -> bool:
    """Calls whose result carries the graph of their arguments: torch functions and losses."""
    name = ctx.dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1].lower()
    return name.startswith(("torch.", "F.")) or "loss" in last or "criterion" in last


def outputs_kept_with_grad(ctx: FileContext) -> Iterator[Finding]:
    tainted: set[str] = set()
    for node in sorted((n for n in ast.walk(ctx.tree) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        if not ctx.under_no_grad(node) and _carries_graph(ctx, node.value, tainted):
            tainted.update(n for n in (ctx.name_of(t) for t in node.targets) if n)
    safe = _functions_called_without_grad(ctx)
    for node in ast.walk(ctx.tree):
        kept: ast.AST | None = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "add")
            and node.args
        ):
            kept = node.args[0]
            if isinstance(kept, (ast.List, ast.Tuple)) and node.func.attr == "extend":
                kept = next((e for e in kept.elts if _carries_graph(ctx, e, tainted)), None)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            kept = node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and ctx.in_loop(node) is not None:
            kept = node.value
        if kept is None or not _carries_graph(ctx, kept, tainted) or _grad_free(ctx, node, safe):
            continue
        yield ctx.finding(
            node,
            "SB302",
            f"{ast.unparse(kept)} keeps its autograd graph alive: store {ast.unparse(kept)}.detach() (or .item()), or run under torch.inference_mode()",
        )


CHECKS = (discarded_to_result, inference_without_no_grad, missing_eval, per_sample_loop, outputs_kept_with_grad)
