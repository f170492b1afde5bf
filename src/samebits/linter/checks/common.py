"""What every static check needs: import aliases, dotted names, parents, scopes, and which names
are models and which are tensors."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

# Names that say "module" or "tensor" when nothing better is known (documented in SB202).
MODULE_NAME = re.compile(
    r"(^|_)(model|models|net|network|module|encoder|decoder|backbone|head|classifier|detector|layer|block|policy|critic|actor|generator|discriminator)s?\d*$",
    re.I,
)
TENSOR_NAME = re.compile(
    r"^(x|y|z|xb|yb|x\d|inputs?|input_ids|batch|images?|imgs?|tensor|targets?|labels?|logits|features?|feats|data|sample|samples|mask|tokens|pixel_values|.*_tensor|.*_t)$",
    re.I,
)
MODEL_FACTORIES = (
    "from_pretrained",
    "create_model",
    "jit.load",
    "jit.script",
    "jit.trace",
    "load_model",
    "build_model",
    "get_model",
)
TENSOR_FACTORIES = {
    "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.randn", "torch.rand", "torch.randint", "torch.zeros", "torch.ones",
    "torch.empty", "torch.full", "torch.arange", "torch.linspace", "torch.stack", "torch.cat", "torch.randn_like", "torch.rand_like",
    "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.normal", "torch.randperm",
}  # fmt: skip
RANDOM_TENSOR = {
    "torch.randn",
    "torch.rand",
    "torch.randint",
    "torch.randperm",
    "torch.normal",
    "torch.randn_like",
    "torch.rand_like",
    "torch.bernoulli",
    "torch.multinomial",
}
SEED_CALLS = {
    "torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "numpy.random.seed", "random.seed",
    "samebits.seed_everything", "seed_everything", "lightning.seed_everything", "pytorch_lightning.seed_everything",
    "lightning.pytorch.seed_everything", "transformers.set_seed", "set_seed", "samebits.deterministic",
}  # fmt: skip
NO_GRAD = {
    "torch.no_grad",
    "torch.inference_mode",
    "torch.set_grad_enabled",
    "torch.autograd.grad_mode.no_grad",
    "no_grad",
    "inference_mode",
}


@dataclasses.dataclass
class Finding:
    """One finding: where, which rule, and what exactly."""

    path: str
    line: int
    col: int
    code: str
    name: str
    message: str

    def text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.name} {self.message}"


class FileContext:
    """A parsed file with the facts the checks share."""

    def __init__(
        self, path: Path, display: str, source: str, tree: ast.Module, project_min_torch: tuple[int, int] | None = None
    ) -> None:
        self.path, self.display, self.source, self.tree = path, display, source, tree
        self.project_min_torch = project_min_torch
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.aliases = _aliases(tree)
        self.module_classes = _module_classes(tree, self)
        self.calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        self.call_names = {self.dotted(c.func) for c in self.calls} - {None}
        self.models, self.tensors, self.bound_models = _bindings(self)

    def finding(self, node: ast.AST, code: str, message: str | None = None) -> Finding:
        from samebits.rules import BY_CODE

        rule = BY_CODE[code]
        return Finding(
            self.display,
            getattr(node, "lineno", 1),
            getattr(node, "col_offset", 0) + 1,
            code,
            rule.name,
            message or rule.message,
        )

    def dotted(self, node: ast.AST) -> str | None:
        """``torch.backends.cudnn.benchmark`` for an attribute chain, with import aliases resolved."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(self.aliases.get(node.id, node.id))
        elif isinstance(node, ast.Call) and parts:  # torch.nn.Linear(...).to: keep the method name visible
            inner = self.dotted(node.func)
            parts.append(f"{inner}()" if inner else "()")
        else:
            return None
        return ".".join(reversed(parts))

    def name_of(self, node: ast.AST) -> str | None:
        """A variable's name: ``model`` for ``model``, ``self.model`` for ``self.model``."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def under_no_grad(self, node: ast.AST) -> bool:
        """Inside ``with torch.no_grad()/inference_mode()/set_grad_enabled(False)`` or a function decorated so."""
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.With, ast.AsyncWith)):
                if any(self._is_no_grad(item.context_expr) for item in parent.items):
                    return True
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(self._is_no_grad(d) for d in parent.decorator_list):
                    return True
        return False

    def _is_no_grad(self, expr: ast.AST) -> bool:
        target = expr.func if isinstance(expr, ast.Call) else expr
        name = self.dotted(target) or ""
        if name in ("torch.set_grad_enabled", "set_grad_enabled"):
            return (
                isinstance(expr, ast.Call)
                and bool(expr.args)
                and isinstance(expr.args[0], ast.Constant)
                and expr.args[0].value is False
            )
        return name in NO_GRAD or name.endswith((".no_grad", ".inference_mode"))

    def in_loop(self, node: ast.AST) -> ast.AST | None:
        for parent in self.ancestors(node):
            if isinstance(
                parent, (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.ListComp, ast.GeneratorExp)
            ):
                return parent
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return None
        return None

    def is_model_call(self, call: ast.AST) -> bool:
        """``model(x)`` / ``self.model(x)`` / ``model.forward(x)`` on a name known to be a model."""
        if not isinstance(call, ast.Call):
            return False
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        name = self.name_of(func)
        return name is not None and name in self.models

    @property
    def trains(self) -> bool:
        """Whether the file has a training step (a backward pass or an optimizer step)."""
        return (
            any(n.endswith((".backward", ".step")) and not n.endswith("scheduler.step") for n in self.call_names)
            or "backward" in self.call_names
        )

    @property
    def inference_file(self) -> bool:
        """The file looks like inference: it calls .eval(), loads weights, or uses no_grad, and does not train."""
        if self.trains:
            return False
        signs = (
            ".eval",
            ".load_state_dict",
            "torch.load",
            "torch.no_grad",
            "torch.inference_mode",
            "torch.jit.load",
            ".from_pretrained",
        )
        return any(n.endswith(signs) or n in signs for n in self.call_names) or any(
            isinstance(p, ast.With) and any(self._is_no_grad(i.context_expr) for i in p.items)
            for p in ast.walk(self.tree)
        )

    def asks_for_determinism(self) -> bool:
        for call in self.calls:
            name = self.dotted(call.func) or ""
            if name == "torch.use_deterministic_algorithms" and call.args and _truthy(call.args[0]):
                return True
            if name in ("samebits.deterministic", "deterministic") or name.endswith(".enable_full_determinism"):
                return True
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and _truthy(node.value):
                if any((self.dotted(t) or "").endswith("cudnn.deterministic") for t in node.targets):
                    return True
        return False


def _truthy(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _aliases(tree: ast.Module) -> dict[str, str]:
    """``{"np": "numpy", "nn": "torch.nn", "DataLoader": "torch.utils.data.DataLoader"}``."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _module_classes(tree: ast.Module, ctx: FileContext) -> set[str]:
    """Classes of this file that subclass an ``nn.Module`` (directly or through another such class)."""
    found: set[str] = set()
    changed = True
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    while changed:
        changed = False
        for cls in classes:
            if cls.name in found:
                continue
            for base in cls.bases:
                name = ctx.dotted(base) or ""
                if name.endswith(("nn.Module", "LightningModule", "PreTrainedModel", "nn.Sequential")) or name in found:
                    found.add(cls.name)
                    changed = True
    return found


def _value_kind(ctx: FileContext, value: ast.AST) -> str | None:
    """``"model"``, ``"tensor"`` or ``None`` for the value bound to a name."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("eval", "to", "cuda", "cpu", "train", "half", "float", "requires_grad_")
    ):
        inner = _value_kind(ctx, value.func.value)
        if inner is not None:
            return inner
        value = value.func.value
    if isinstance(value, ast.Call):
        name = ctx.dotted(value.func) or ""
        last = name.rsplit(".", 1)[-1]
        if (
            name.startswith(("torch.nn.", "nn."))
            and last[:1].isupper()
            and last not in ("Parameter", "ParameterList", "ParameterDict")
        ):
            return "model"
        if last in ctx.module_classes or name.endswith(MODEL_FACTORIES):
            return "model"
        if name in TENSOR_FACTORIES:
            return "tensor"
    return None


def _bindings(ctx: FileContext) -> tuple[set[str], set[str], set[str]]:
    """(names that are models, names that are tensors, names bound here to a model-making call)."""
    models: set[str] = set()
    tensors: set[str] = set()
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Assign):
            kind = _value_kind(ctx, node.value)
            for target in node.targets:
                name = ctx.name_of(target)
                if name and kind == "model":
                    models.add(name)
                elif name and kind == "tensor":
                    tensors.add(name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.annotation is not None and (ctx.dotted(arg.annotation) or "").endswith(("nn.Module", "Module")):
                    models.add(arg.arg)
    bound = set(models)
    # Variables whose name says "model" count as models unless bound to a tensor (documented
    # heuristic); names of functions, classes and imports are not variables.
    not_variables = set(ctx.aliases) | {
        n.name for n in ast.walk(ctx.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    for node in ast.walk(ctx.tree):
        name = (
            ctx.name_of(node)
            if isinstance(node, (ast.Name, ast.Attribute, ast.arg))
            else (node.arg if isinstance(node, ast.arg) else None)
        )
        if isinstance(node, ast.arg):
            name = node.arg
        if (
            name
            and name not in tensors
            and name not in not_variables
            and MODULE_NAME.search(name.removeprefix("self."))
        ):
            models.add(name)
    return models, tensors, bound
