"""SB107 missing-eval, SB201 per-sample-loop, SB202 discarded-to-result, SB203
dataloader-main-process, SB301 inference-without-no-grad, SB302 outputs-kept-with-grad:
inference done wrong."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from samebits.linter.checks import grad
from samebits.linter.checks.common import TENSOR_NAME, FileContext, Finding, Fixer, loads_in_main_process
from samebits.linter.checks.edits import Edit, Fix, indent_unit, spans_string_lines
from samebits.linter.checks.models import FUNCTIONS, INFERENCE_METHODS, same_scope

MOVES = ("to", "cuda", "cpu", "half", "float", "double", "bfloat16", "contiguous", "long", "int", "pin_memory")
DETACHED = ("detach", "item", "tolist", "numpy", "argmax", "argmin")


def _is_tensorish(ctx: FileContext, node: ast.AST) -> bool:
    name = ctx.name_of(node)
    if name is not None:
        if ctx.models.is_model(node):
            return False
        return name in ctx.tensors or bool(TENSOR_NAME.match(name.removeprefix("self.")))
    if isinstance(node, ast.Subscript):
        return _is_tensorish(ctx, node.value)
    if isinstance(node, ast.Call):
        from samebits.linter.checks.common import TENSOR_FACTORIES

        return (ctx.dotted(node.func) or "") in TENSOR_FACTORIES
    return False


# A tokenizer's or processor's output (transformers' BatchEncoding/BatchFeature): its ``.to()``
# moves the tensors in place and returns itself, so a bare ``inputs.to(device)`` is no mistake.
_ENCODERS = re.compile(r"(^|_)(tokeni[sz]er|processor|feature_extractor|image_processor)$", re.I)


def _encoded(ctx: FileContext, name: str, before: ast.AST) -> bool:
    """``name``'s last binding before ``before`` (in the same function) is a tokenizer's or
    processor's call: ``inputs = processor(audio, return_tensors="pt")``."""
    scope = next((a for a in ctx.ancestors(before) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    last = None
    for node in ctx.nodes:
        if (
            isinstance(node, ast.Assign)
            and node.lineno < getattr(before, "lineno", 0)
            and any(ctx.name_of(t) == name for t in node.targets)
            and next((a for a in ctx.ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            is scope
            and (last is None or node.lineno > last.lineno)
        ):
            last = node
    if last is None or not isinstance(last.value, ast.Call):
        return False
    func = last.value.func
    callee = func.attr if isinstance(func, ast.Attribute) else ast.unparse(func)
    receiver = ast.unparse(func.value).rsplit(".", 1)[-1] if isinstance(func, ast.Attribute) else ""
    return bool(_ENCODERS.search(callee) or _ENCODERS.search(receiver))


def discarded_to_result(ctx: FileContext) -> Iterator[Finding]:
    for node in ctx.nodes:
        if not (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
        ):
            continue
        func = node.value.func
        if func.attr in MOVES and _is_tensorish(ctx, func.value):
            target = ast.unparse(func.value)
            if func.attr == "to" and _encoded(ctx, target, node):
                continue
            yield ctx.finding(
                node,
                "SB202",
                f"{target}.{func.attr}(...) returns a new tensor that is thrown away: {target} stays as it was; write {target} = {target}.{func.attr}(...)",
            )


def _in_forward(ctx: FileContext, node: ast.AST) -> bool:
    """Inside a model's own code: a ``forward``, a Lightning step, or any method of a module
    class (a plain class's ``__call__`` is a caller, not a forward)."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.name in (
            "forward",
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
    """Functions and methods (``f(...)``, ``self.f(...)``) run with grad off, by name: called under
    no_grad in this file or another file of the project, or passed (``sample_loop(model_fn)``) to
    a project function that runs what it is given under no_grad."""
    names = set(ctx.project.called_under_no_grad(ctx.module))
    defined = {n.name for n in ctx.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ctx.nodes:  # one_by_one handed to a timer under no_grad, a callback in a dict
        if isinstance(node, ast.Name) and node.id in defined and ctx.under_no_grad(node):
            names.add(node.id)
    for call in ctx.calls:
        if ctx.under_no_grad(call) and (name := ctx.name_of(call.func)):
            names.add(name.removeprefix("self."))
        for function, skip in ctx.project.callee(ctx, call, by_name=True):
            free = ctx.project.param_facts(function, "no_grad")
            names.update(
                n.removeprefix("self.")
                for p, a in ctx.project.arguments(function, call, skip)
                if p in free and (n := ctx.name_of(a))
            )
    return names


def _functions_called_with_grad(ctx: FileContext, free: set[str]) -> set[str]:
    """Functions and methods this file calls where grad is on by default (one level: a call inside
    a function run with grad off is not)."""
    return {
        name.removeprefix("self.")
        for call in ctx.calls
        if (name := ctx.name_of(call.func)) and not ctx.grad_chosen(call) and _enclosing_function(ctx, call) not in free
    }


def _enclosing_function(ctx: FileContext, node: ast.AST) -> str | None:
    function = _function_of(ctx, node)
    return function.name if function is not None else None  # type: ignore[attr-defined]


def _parameter(ctx: FileContext, node: ast.AST, name: str | None) -> str | None:
    """The enclosing function's name when ``name`` is one of its parameters."""
    function = _function_of(ctx, node)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = function.args
    return function.name if name in {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs} else None


def _grad_free_classes(ctx: FileContext) -> set[str]:
    """Module classes of this file whose ``forward`` turns grad off itself: its whole body under
    ``with torch.no_grad()``, or the method decorated so."""
    found = set()
    for cls in ctx.nodes:
        if not (isinstance(cls, ast.ClassDef) and cls.name in ctx.module_classes):
            continue
        forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
        if forward is not None and grad.turns_grad_off(ctx, forward):
            found.add(cls.name)
    return found


class GradFree(NamedTuple):
    """What turns grad off in a file besides ``with`` and decorators, found once per rule."""

    functions: set[str]  # functions run with grad off (called under no_grad here or elsewhere)
    classes: set[str]  # module classes whose forward turns grad off itself
    with_grad: set[str]  # functions this file calls with grad on
    volatile: set[ast.AST]  # functions whose inputs are volatile (torch < 0.4)

    @classmethod
    def of(cls, ctx: FileContext) -> GradFree:
        free = _functions_called_without_grad(ctx)
        return cls(free, _grad_free_classes(ctx), _functions_called_with_grad(ctx, free), _volatile_scopes(ctx))


def _volatile_scopes(ctx: FileContext) -> set[ast.AST]:
    """Functions (the module for top-level code) that make an input ``Variable(x, volatile=True)``:
    torch < 0.4's no-grad."""
    out: set[ast.AST] = set()
    for call in ctx.calls:
        if any(
            k.arg == "volatile" and not (isinstance(k.value, ast.Constant) and not k.value.value) for k in call.keywords
        ):
            out.add(_function_of(ctx, call) or ctx.tree)
    return out


def _function_of(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    return next((p for p in ctx.ancestors(node) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def _needs_grad(ctx: FileContext, node: ast.AST) -> bool:
    """The function around ``node`` (the module for top-level code) back-propagates on purpose in
    an inference file: ``score.backward()`` or ``torch.autograd.grad(...)`` for a saliency map or an
    adversarial input. Its model calls need grad mode on (a loss's backward makes the file training)."""
    scope = _function_of(ctx, node) or ctx.tree
    return any(
        isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == "backward")
            or (ctx.dotted(n.func) or "") in ("torch.autograd.grad", "torch.autograd.backward")
        )
        for stmt in getattr(scope, "body", [])
        for n in same_scope(stmt)
    )


def _method_turns_grad_off(ctx: FileContext, call: ast.AST, model: ast.AST | None) -> bool:
    """``model.sample(...)`` where the model's class turns grad off in that method (decorated with
    no_grad, or its body one no_grad block): its class of this file, else (the class not known
    here) every method of that name in the project's classes, when there is one and all do."""
    if model is None or not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr in ("forward", "__call__"):
        return False
    name = call.func.attr
    cls = ctx.models.class_of(model)
    if cls is not None:
        for node in ctx.nodes:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                method = next((f for f in node.body if isinstance(f, FUNCTIONS) and f.name == name), None)
                return method is not None and grad.turns_grad_off(ctx, method)
        return False
    methods = ctx.project.methods_named(name)
    return bool(methods) and all(m.data.get("grad_off") for m in methods)


def _grad_free(ctx: FileContext, node: ast.AST, free: GradFree) -> bool:
    model = ctx.models.called_model(node)
    return (
        ctx.grad_chosen(node)
        or _method_turns_grad_off(ctx, node, model)
        or (_function_of(ctx, node) or ctx.tree) in free.volatile
        or _in_forward(ctx, node)
        or _enclosing_function(ctx, node) in free.functions
        or _callers_choice(ctx, node, model, free)
        or (model is not None and ctx.models.class_of(model) in free.classes)
    )


def _callers_choice(ctx: FileContext, node: ast.AST, model: ast.AST | None, free: GradFree) -> bool:
    """``def predict(model, x): return model(x)``: grad mode is the caller's choice, unless this
    file calls the function with grad on (``test_net(net, ...)`` outside no_grad)."""
    function = _parameter(ctx, node, ctx.name_of(model) if model is not None else None)
    return function is not None and function not in free.with_grad


def inference_without_no_grad(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.inference_file:
        return
    safe = GradFree.of(ctx)
    for call in ctx.calls:
        if ctx.is_model_call(call) and not _grad_free(ctx, call, safe) and not _needs_grad(ctx, call):
            yield ctx.finding(
                call,
                "SB301",
                f"{ast.unparse(call.func)}(...) runs for inference with grad mode on: wrap it in torch.inference_mode()",
            )
        else:
            yield from _runs_in_another_file(ctx, call, safe)


def _runs_in_another_file(ctx: FileContext, call: ast.Call, safe: GradFree) -> Iterator[Finding]:
    """``evaluate(net, loader)`` where ``evaluate`` (another file of the project) runs ``net``
    with grad mode on: found at this call, which chose the grad mode."""
    for function, skip in ctx.project.callee(ctx, call):
        if function.module == ctx.module or _grad_free(ctx, call, safe):
            continue  # this file's own: found at the model call inside it
        runs = ctx.project.param_facts(function, "forwards")
        for param, arg in ctx.project.arguments(function, call, skip):
            name = ctx.name_of(arg)
            if param in runs and ctx.models.is_model(arg) and not _callers_choice(ctx, call, arg, safe):
                yield ctx.finding(
                    call,
                    "SB301",
                    f"{name} runs in {function.name}() of {function.where} with grad mode on: call {function.name} under torch.inference_mode()",
                )
                return


def missing_eval(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.inference_file:
        return
    for call, name, via in ctx.models.unevaluated_calls():
        if _in_forward(ctx, call):
            continue
        model = next((a for a in call.args if ctx.name_of(a) == name), None) if via else None
        source = ctx.models.source(model or (call.func.value if isinstance(call.func, ast.Attribute) else call.func))
        if source is not None and source.where and source.what.startswith("made in"):
            origin = f" ({source.what}, never eval'd there)"
        else:
            origin = f" (made by {source.what})" if source is not None else ""
        used = f"is run by {via}" if via else "is used for inference"
        yield ctx.finding(
            call,
            "SB107",
            f"{name}{origin} {used} without eval mode on this path: call {name}.eval() after loading",
        )


def _single_item(ctx: FileContext, arg: ast.AST) -> bool:
    if isinstance(arg, ast.Call) and (ctx.dotted(arg.func) or "").split(".")[-1] == "Variable" and arg.args:
        return _single_item(ctx, arg.args[0])  # Variable(x.unsqueeze(0)): old torch's wrapper, still one sample
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr in ("unsqueeze", "unsqueeze_")
    ):
        dim = arg.args[0] if arg.args else next((k.value for k in arg.keywords if k.arg == "dim"), None)
        return isinstance(dim, ast.Constant) and dim.value == 0
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


def _fixed_size(ctx: FileContext) -> bool:
    """Whether the file's inputs have one fixed size (:func:`resizes_to_fixed_size`), here or in
    a function or class of the project that the file calls."""
    return resizes_to_fixed_size(ctx, ctx.calls) or any(ctx.project.fixed_size(ctx, c) for c in ctx.calls)


def resizes_to_fixed_size(ctx: FileContext, calls: list[ast.Call]) -> bool:
    """Whether one of ``calls`` makes every input one size on every path: a ``Resize`` to (h, w),
    a crop to a size (``CenterCrop``, ``RandomResizedCrop``, ``RandomCrop``), ``cv2.resize`` to
    (w, h), PIL's ``img.resize((w, h))`` (a resample argument or not). One applied only in
    a branch (``if args.crop_val:``) leaves the other path's sizes free."""
    pairs = {
        n
        for node in ctx.nodes
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == 2
        for n in (ctx.name_of(t) for t in node.targets)
        if n
    }

    def pair(arg: ast.AST | None) -> bool:
        return (isinstance(arg, (ast.Tuple, ast.List)) and len(arg.elts) == 2) or ctx.name_of(
            arg or ast.Pass()
        ) in pairs

    for call in calls:
        last = (ctx.dotted(call.func) or "").rsplit(".", 1)[-1]
        keywords = {k.arg: k.value for k in call.keywords}
        size = call.args[0] if call.args else keywords.get("size")
        if _optional(ctx, call):
            continue
        if last in ("CenterCrop", "RandomResizedCrop", "RandomCrop", "FiveCrop", "TenCrop"):
            return True
        if last == "Resize" and (pair(size) or len(call.args) == 2 or {"height", "width"} <= set(keywords)):
            return True  # torchvision (h, w); albumentations h, w
        if last == "resize" and (pair(call.args[1] if len(call.args) >= 2 else keywords.get("dsize"))):
            return True  # cv2.resize(img, (w, h)), skimage's resize(img, (h, w))
        if last == "resize" and isinstance(call.func, ast.Attribute) and pair(size):
            return True  # PIL: img.resize((w, h)), img.resize((w, h), Image.BILINEAR)
    return False


def _optional(ctx: FileContext, node: ast.AST) -> bool:
    """Inside a branch taken only sometimes: an ``if`` (but ``if __name__ == "__main__":``) or a
    conditional expression, within the same function."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        if isinstance(parent, ast.IfExp):
            return True
        if isinstance(parent, ast.If) and "__name__" not in ast.unparse(parent.test):
            return True
    return False


def _batch_of_one_loaders(ctx: FileContext) -> dict[str, ast.Call]:
    """Names bound to ``DataLoader(...)`` with batch size 1 (given, or the default), directly or
    through a function of this file that returns one, each with its ``DataLoader(...)`` call."""

    def one(node: ast.AST) -> ast.Call | None:
        if not (isinstance(node, ast.Call) and (ctx.dotted(node.func) or "").endswith("DataLoader")):
            return None
        keywords = {k.arg: k.value for k in node.keywords}
        if None in keywords or "batch_sampler" in keywords or len(node.args) > 1:
            return None
        size = keywords.get("batch_size")
        return node if size is None or (isinstance(size, ast.Constant) and size.value == 1) else None

    names: dict[str, ast.Call] = {}
    returned: dict[str, list[ast.Call | None]] = {}
    for function in ctx.nodes:
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Return) and node.value is not None:
                    parts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    returned[function.name] = [one(p) for p in parts]
    for node in ctx.nodes:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            call = node.value
            made = one(call)
            if made is not None and len(elts) == 1:
                names.update({n: made for n in [ctx.name_of(elts[0])] if n})
            elif isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in returned:
                loaders = returned[call.func.id]
                if len(loaders) == len(elts):
                    names.update({n: c for e, c in zip(elts, loaders) if c is not None and (n := ctx.name_of(e))})
    return names


def _loop_source(ctx: FileContext, loop: ast.AST) -> str | None:
    """The name a ``for`` loop iterates: ``loader`` of ``for x in loader`` / ``enumerate(loader)`` /
    ``tqdm(loader)``."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None
    it = loop.iter
    while isinstance(it, ast.Call) and it.args:
        it = it.args[0]
    return ctx.name_of(it)


def _one_sample_names(ctx: FileContext, loop: ast.AST) -> set[str]:
    """Names made a batch of one earlier in the loop body (``x = tf(img).unsqueeze(0)``), and
    names copied from them (``x = x.to(device)``)."""
    names: set[str] = set()
    for node in sorted((n for n in ast.walk(loop) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        value = node.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
            value = value.func.value
        if _single_item(ctx, value) or ctx.name_of(value) in names:
            names.update(n for n in (ctx.name_of(t) for t in node.targets) if n)
    return names


def per_sample_loop(ctx: FileContext) -> Iterator[Finding]:
    fixed = None
    loaders: dict[str, ast.Call] | None = None
    for call in ctx.calls:
        if not ctx.is_model_call(call) or _in_forward(ctx, call):
            continue
        loop = ctx.in_loop(call)
        if loop is None:
            continue
        arg = call.args[0] if call.args else None
        if arg is not None and _single_item(ctx, arg):
            yield ctx.finding(
                call,
                "SB201",
                f"{ast.unparse(call.func)} is called on one sample per iteration ({ast.unparse(arg)}): batch the samples",
            )
            continue
        fixed = _fixed_size(ctx) if fixed is None else fixed
        if not fixed:
            continue  # inputs of varying size cannot simply be stacked
        loaders = _batch_of_one_loaders(ctx) if loaders is None else loaders
        base = arg.func.value if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) else arg
        if arg is not None and base is not None and ctx.name_of(base) in _one_sample_names(ctx, loop):
            yield ctx.finding(
                call,
                "SB201",
                f"{ast.unparse(call.func)} is called on one sample per iteration ({ast.unparse(arg)} was made a batch of one above) although the inputs have one fixed size: batch the samples",
            )
        elif _loop_source(ctx, loop) in loaders:
            yield ctx.finding(
                call,
                "SB201",
                f"{ast.unparse(call.func)} is called once per sample: the DataLoader has batch size 1 (given or by default) over fixed-size inputs; pass batch_size=",
            )


def dataloader_main_process(ctx: FileContext) -> Iterator[Finding]:
    """SB203: a per-sample inference loop over a ``DataLoader`` that loads in the main process,
    over inputs that cannot simply be batched (of one fixed size, SB201 says batch them)."""
    if not ctx.inference_file:
        return
    loaders: dict[str, ast.Call] | None = None
    reported: set[int] = set()
    for call in ctx.calls:
        if not ctx.is_model_call(call) or _in_forward(ctx, call) or (loop := ctx.in_loop(call)) is None:
            continue
        if loaders is None:
            if _fixed_size(ctx):
                return
            loaders = {n: c for n, c in _batch_of_one_loaders(ctx).items() if loads_in_main_process(c)}
        loader = loaders.get(_loop_source(ctx, loop) or "")
        if loader is not None and id(loader) not in reported:
            reported.add(id(loader))
            yield ctx.finding(
                loader,
                "SB203",
                f"this DataLoader feeds {ast.unparse(call.func)} one sample at a time from the main process (num_workers 0): each forward waits for its sample to be read and transformed; pass num_workers=N so that workers load ahead",
            )


def _carries_graph(ctx: FileContext, expr: ast.AST, tainted: set[str]) -> bool:
    """Whether ``expr`` is (derived from) a model output that still carries its graph."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in DETACHED:
        return False
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        return False  # ``.data`` is the tensor without its graph
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("float", "int", "bool", "len", "str")
    ):
        return False
    if isinstance(expr, ast.Subscript) and _method_result_by_key(ctx, expr):
        return False
    if ctx.is_model_call(expr):
        return True
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(_carries_graph(ctx, e, tainted) for e in expr.elts)  # (name, model(x)): kept inside
    if isinstance(expr, ast.Dict):
        return any(_carries_graph(ctx, v, tainted) for v in expr.values)
    if isinstance(expr, ast.Starred):
        return _carries_graph(ctx, expr.value, tainted)
    name = ctx.name_of(expr)
    if name is not None:
        return name in tainted
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        return _carries_graph(ctx, expr.func.value, tainted)
    if isinstance(expr, ast.Attribute):
        return _carries_graph(ctx, expr.value, tainted)
    if isinstance(expr, (ast.BinOp, ast.Subscript)):
        parts = [expr.left, expr.right] if isinstance(expr, ast.BinOp) else [expr.value]
        return any(_carries_graph(ctx, p, tainted) for p in parts)
    if isinstance(expr, ast.Call) and _propagates(ctx, expr):
        return any(_carries_graph(ctx, a, tainted) for a in expr.args)
    return False


def _method_result_by_key(ctx: FileContext, expr: ast.Subscript) -> bool:
    """``model.inference(x)["predictions"]``: a value an inference method (not the forward) returns
    under a string key, a post-processed result (labels, strings, boxes) of a type not known here."""
    key = expr.slice
    call = expr.value
    return (
        isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in INFERENCE_METHODS
        and ctx.is_model_call(call)
    )


def _propagates(ctx: FileContext, call: ast.Call) -> bool:
    """Calls whose result carries the graph of their arguments: torch functions and losses."""
    name = ctx.dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1].lower()
    return name.startswith(("torch.", "F.")) or "loss" in last or "criterion" in last


def _graph_targets(ctx: FileContext, assign: ast.Assign, tainted: set[str]) -> list[ast.expr]:
    """The targets of ``assign`` that receive a value carrying a graph: each of ``logits, feats =
    model(x)``, only ``out`` of ``name, out = path, model(x)``."""
    found: list[ast.expr] = []
    value = assign.value
    for target in assign.targets:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            found += [t for t, v in zip(target.elts, value.elts) if _carries_graph(ctx, v, tainted)]
        elif _carries_graph(ctx, value, tainted):
            found += target.elts if isinstance(target, ast.Tuple) else [target]
    return found


def outputs_kept_with_grad(ctx: FileContext) -> Iterator[Finding]:
    tainted: set[str] = set()
    for assign in sorted((n for n in ctx.nodes if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        if not ctx.under_no_grad(assign):
            tainted.update(n for n in map(ctx.name_of, _graph_targets(ctx, assign, tainted)) if n)
    safe = GradFree.of(ctx)
    for node in ctx.nodes:
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


CHECKS = (
    ("SB202", discarded_to_result),
    ("SB301", inference_without_no_grad),
    ("SB107", missing_eval),
    ("SB201", per_sample_loop),
    ("SB203", dataloader_main_process),
    ("SB302", outputs_kept_with_grad),
)


# -- fixes (samebits lint --fix; the registry's Rule.autofix says what each does)


def _plain(node: ast.AST) -> bool:
    """A name, ``self.x``, ``batch["x"]``, ``xs[i]``: written twice, evaluated twice to no effect."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _plain(node.value)
    if isinstance(node, ast.Subscript):
        keys = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _plain(node.value) and all(isinstance(k, (ast.Constant, ast.Name)) for k in keys)
    return False


def fix_discarded_to_result(ctx: FileContext, node: ast.AST) -> Fix | str:
    """SB202's fix: ``x.cuda()`` -> ``x = x.cuda()``."""
    func = node.value.func  # type: ignore[attr-defined]
    target = func.value
    text = ast.get_source_segment(ctx.source, target)
    if not _plain(target) or text is None or target.lineno != target.end_lineno:
        return f"{ast.unparse(target)} is not a plain name, attribute or subscript: bind it to a name first"
    line, col = ctx.lines.start(node)
    return Fix(f"assign the result: {text} = {text}.{func.attr}(...)", (Edit(line, col, line, col, f"{text} = "),))


def fix_missing_eval(ctx: FileContext, call: ast.AST) -> Fix | str:
    """SB107's fix: ``model.eval()`` on the line after the model's last assignment before the call."""
    models = ctx.models
    model = models.called_model(call)
    if model is None and isinstance(call, ast.Call):  # run by a project function: the model it is given
        model = next((a for a in call.args if models.is_model(a) and models.starts_in_training(a)), None)
    key = models.key(model) if model is not None else None
    if model is None or key is None:
        return "the model is not a name or self. attribute of this file"
    name = ctx.name_of(model)
    bindings = [
        n
        for n in ctx.nodes
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and n.value is not None
        and any(models.key(e) == key for t in _targets(n) for e in (t.elts if isinstance(t, ast.Tuple) else [t]))
    ]
    if not bindings:
        return f"{name} is not assigned in this file (a parameter, an import, a loop or with variable): call {name}.eval() where it is made"
    where = (call.lineno, call.col_offset)  # type: ignore[attr-defined]
    last = max(
        [b for b in bindings if (b.lineno, b.col_offset) < where] or bindings, key=lambda b: (b.lineno, b.col_offset)
    )
    if not ctx.lines.alone(last):
        return f"{name}'s assignment (line {last.lineno}) shares its line with another statement"
    end = last.end_lineno or last.lineno
    text = f"{ctx.lines.newline(end)}{ctx.lines.indent(last.lineno)}{name}.eval()"
    column = len(ctx.lines[end])
    return Fix(f"call {name}.eval() after its last assignment", (Edit(end, column, end, column, text),))


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # fmt: skip
LATER = (ast.Lambda, ast.GeneratorExp)  # code that runs after the statement, outside a with around it


INFERENCE_MODE_SINCE = (1, 9)  # the first torch with torch.inference_mode


def _grad_off_block(ctx: FileContext) -> tuple[str | None, str]:
    """The context manager that turns grad off, as the file's top-level imports spell it
    (``T.inference_mode()`` after ``import torch as T``; ``inference_mode()`` after ``from torch
    import inference_mode``): ``inference_mode``, or ``no_grad`` where the project supports torch
    older than 1.9. ``(None, why)`` where there is none to write."""
    if ctx.targets_old_torch:
        return (
            None,
            "the code is written for torch < 0.4 (Variable, volatile=), which has neither no_grad nor inference_mode",
        )
    old = ctx.project_min_torch is not None and ctx.project_min_torch < INFERENCE_MODE_SINCE
    wanted = "no_grad" if old else "inference_mode"
    for stmt in ctx.tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name == "torch" or (a.asname is None and a.name.startswith("torch.")):
                    return f"{a.asname or 'torch'}.{wanted}()", ""
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "torch" and not stmt.level:
            for a in stmt.names:
                if a.name == wanted:
                    return f"{a.asname or a.name}()", ""
    return None, "torch is not imported at the top of the file (import torch)"


def _changed_in_place(ctx: FileContext, stmt: ast.stmt) -> ast.AST | None:
    """A later statement of the same function that changes a name ``stmt`` binds in place
    (``y += 1``, ``y[0] = 0``, ``y.add_(1)``): inference tensors refuse that outside inference mode."""
    bound = {
        e.id
        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)])
        for e in (t.elts if isinstance(t, ast.Tuple) else [t])
        if isinstance(e, ast.Name)
    }
    scope = _function_of(ctx, stmt) or ctx.tree
    for node in ast.walk(scope):
        if not bound or getattr(node, "lineno", 0) <= (stmt.end_lineno or stmt.lineno):
            continue
        base: ast.AST | None = None
        if isinstance(node, ast.AugAssign):
            base = node.target
        elif isinstance(node, ast.Assign):
            base = next((t.value for t in node.targets if isinstance(t, ast.Subscript)), None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            base = node.func.value if attr.endswith("_") and not attr.startswith("_") else None
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        if isinstance(base, ast.Name) and base.id in bound:
            return node
    return None


def fix_inference_without_no_grad(ctx: FileContext, call: ast.AST) -> Fix | str:
    """SB301's fix: the statement holding the call wrapped in ``with torch.inference_mode():``."""
    mode, why = _grad_off_block(ctx)
    if mode is None:
        return why
    stmt = next(p for p in ctx.ancestors(call) if isinstance(p, ast.stmt))
    if isinstance(stmt, COMPOUND) or type(stmt).__name__ in ("Match", "TryStar"):
        return f"the call is in the header of a {type(stmt).__name__.lower()} statement: wrap the block by hand"
    path = list(ctx.ancestors(call))
    if any(isinstance(p, LATER) for p in path[: path.index(stmt)]):
        return "the call is in a lambda or generator expression, which runs later, outside the block"
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(stmt)):
        return "the statement yields or awaits: inference mode would stay on in other code meanwhile"
    if not ctx.lines.alone(stmt):
        return "the statement shares its line with another"
    if spans_string_lines(stmt):
        return "a string literal in the statement spans lines, which re-indenting could change"
    changed = _changed_in_place(ctx, stmt) if "inference_mode" in mode else None
    if changed is not None:
        return f"its output is changed in place at line {changed.lineno}, which an inference tensor refuses outside inference mode: wrap that code too, or use torch.no_grad()"  # type: ignore[attr-defined]
    lines = ctx.lines
    indent = lines.indent(stmt.lineno)
    unit = indent_unit(ctx.tree, lines, indent)
    body = [unit + t if t.strip() else t for t in lines.text[stmt.lineno - 1 : stmt.end_lineno]]
    joined = "".join(t + lines.ends[stmt.lineno - 1 + i] for i, t in enumerate(body[:-1])) + body[-1]
    if _after_own_block(ctx, stmt, mode):
        return Fix(f"run the statement in the {mode} block just above", (lines.whole(stmt, joined),))
    header = f"{indent}with {mode}:{lines.newline(stmt.lineno)}"
    return Fix(f"wrap the statement in with {mode}:", (lines.whole(stmt, header + joined),))


def _after_own_block(ctx: FileContext, stmt: ast.stmt, mode: str) -> bool:
    """``stmt`` comes right after (on the next line) a ``with <mode>:`` block of one item at its
    own level, such as this fix makes: it can join that block."""
    parent = ctx.parents.get(stmt)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block and block.index(stmt) > 0:
            before = block[block.index(stmt) - 1]
            return (
                isinstance(before, ast.With)
                and len(before.items) == 1
                and before.items[0].optional_vars is None
                and ast.unparse(before.items[0].context_expr) == mode
                and before.end_lineno == stmt.lineno - 1
                and ctx.lines.indent(before.lineno) == ctx.lines.indent(stmt.lineno)
            )
    return False


FIXES: dict[str, Fixer] = {
    "SB107": fix_missing_eval,
    "SB202": fix_discarded_to_result,
    "SB301": fix_inference_without_no_grad,
}
