"""What every static check needs: import aliases, dotted names, parents, scopes, and which names
are models and which are tensors."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from samebits.errors import printable
from samebits.linter.checks import grad
from samebits.linter.checks.edits import Fix, Lines
from samebits.linter.checks.models import Models, user_classes

if TYPE_CHECKING:
    from samebits.linter.project import Project

# Names that say "module" or "tensor" when nothing better is known (documented in SB202).
MODULE_NAME = re.compile(
    r"(^|_)(model|models|net|network|module|encoder|decoder|backbone|head|classifier|detector|segmenter|layer|block|policy|critic|actor|generator|discriminator)s?\d*$",
    re.I,
)
TENSOR_NAME = re.compile(
    r"^(x|y|z|xb|yb|x\d|inputs?|input_ids|batch|images?|imgs?|tensor|targets?|labels?|logits|features?|feats|data|sample|samples|mask|tokens|pixel_values|.*_tensor|.*_t)$",
    re.I,
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


@dataclasses.dataclass
class Finding:
    """One finding: where, which rule, and what exactly; and what ``--fix`` would do about it
    (``fix``), or why it would not (``no_fix``)."""

    path: str
    line: int
    col: int
    code: str
    name: str
    message: str
    fix: Fix | None = dataclasses.field(default=None, compare=False)
    no_fix: str = dataclasses.field(default="", compare=False)
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)  # for its fixer, then dropped

    def text(self) -> str:
        """One line: ``path:line:col: CODE name message`` (a file name's control characters escaped)."""
        return f"{printable(self.path)}:{self.line}:{self.col}: {self.code} {self.name} {self.message}"


Fixer = Callable[["FileContext", ast.AST], "Fix | str"]  # a rule's fix of the node it found, or why none


class FileContext:
    """A parsed file with the facts the checks share."""

    def __init__(
        self,
        path: Path,
        display: str,
        source: str,
        tree: ast.Module,
        project_min_torch: tuple[int, int] | None = None,
        project: Project | None = None,
        module: str = "",
    ) -> None:
        self.path, self.display, self.source, self.tree = path, display, source, tree
        self.project_min_torch = project_min_torch
        self._project, self.module = project, module  # the project index, and this file's module in it
        self.nodes: list[ast.AST] = list(ast.walk(tree))  # every node once, for the checks to scan
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.aliases = _aliases(self.nodes)
        self.module_classes = _module_classes(tree, self)
        self.calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        self.call_names: set[str] = {n for n in (self.dotted(c.func) for c in self.calls) if n is not None}
        self.not_variables = set(self.aliases) | {
            n.name for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }

    @functools.cached_property
    def lines(self) -> Lines:
        """The source's physical lines, for fixes (checks/edits.py)."""
        return Lines(self.source)

    @functools.cached_property
    def project(self) -> Project:
        """The project this file is linted with (linter/project.py); the file alone if none was given."""
        if self._project is None:
            from samebits.linter.project import Project

            self._project = Project.of_tree(self.tree, self.display)
        return self._project

    @functools.cached_property
    def bound_attributes(self) -> dict[str, list[ast.Attribute]]:
        """Names bound to an attribute (``fn = obj.method``, either side of ``a if c else b``)."""
        out: dict[str, list[ast.Attribute]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Assign):
                value = node.value
                values = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out.setdefault(target.id, []).extend(v for v in values if isinstance(v, ast.Attribute))
        return out

    @functools.cached_property
    def tensors(self) -> set[str]:
        """Names bound to a ``torch.*`` tensor factory."""
        return _tensor_names(self)

    @functools.cached_property
    def user_classes(self) -> set[str]:
        return user_classes(self, self.tree)

    @functools.cached_property
    def models(self) -> Models:
        """The file's model facts (checks/models.py), computed for the first rule that asks."""
        return Models(self)

    def finding(self, node: ast.AST, code: str, message: str | None = None) -> Finding:
        from samebits.rules import BY_CODE

        rule = BY_CODE[code]
        line = getattr(node, "lineno", 1)
        return Finding(
            self.display,
            line,
            self.lines.char_col(line, getattr(node, "col_offset", 0)) + 1,  # characters, not the AST's bytes
            code,
            rule.name,
            message or rule.message,
            node=node,
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
        """Where grad is off: inside ``with torch.no_grad()/inference_mode()/set_grad_enabled(False)``,
        a function (or any enclosing one) decorated so, or after a bare ``set_grad_enabled(False)``
        or ``no_grad().__enter__()`` in an enclosing body (checks/grad.py)."""
        return grad.mode(self, node) is False

    def grad_chosen(self, node: ast.AST) -> bool:
        """Grad mode set on purpose where ``node`` runs: off, or on (``enable_grad`` for ``autograd.grad``)."""
        return grad.mode(self, node) is not None

    def _is_no_grad(self, expr: ast.AST) -> bool:
        return grad.switch(self, expr) is False

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
        """``model(x)`` / ``self.model(x)`` / ``model.forward(x)`` on a model (checks/models.py)."""
        return self.models.called_model(call) is not None

    @functools.cached_property
    def targets_old_torch(self) -> bool:
        """In-file evidence of torch < 0.4: ``Variable`` imported or called, ``volatile=`` passed."""
        return any(name.endswith("autograd.Variable") for name in self.aliases.values()) or any(
            k.arg == "volatile" for c in self.calls for k in c.keywords
        )

    @functools.cached_property
    def trains(self) -> bool:
        """Whether the file trains: it builds an optimizer (``torch.optim.*`` or a known optimizer
        class), steps or zeroes one, or calls ``backward`` on a loss. A profiler's ``step()``, an LR
        scheduler and a saliency map's ``score.backward()`` are not training."""
        for call in self.calls:
            name = self.dotted(call.func) or ""
            owner, _, last = name.rpartition(".")
            if _builds_optimizer(name):
                return True
            if last in ("step", "zero_grad") and _named_like_optimizer(owner):
                return True
            if last == "backward" and any("loss" in ast.unparse(n).lower() for n in [call.func, *call.args]):
                return True
        return False

    @functools.cached_property
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
            "torch.hub.load",
            ".from_pretrained",
        )
        return (
            any(n.endswith(signs) or n in signs for n in self.call_names)
            or any(
                isinstance(p, ast.With) and any(self._is_no_grad(i.context_expr) for i in p.items) for p in self.nodes
            )
            or any(_loads_weights(c) for c in self.calls)
            or any(  # from model import model: a model the project put in eval mode
                (found := self.project.instance_source(self, dotted)) is not None and found.train is False
                for dotted in self.aliases.values()
            )
        )

    def seeds_rngs(self) -> bool:
        """Whether the file seeds a global RNG (``torch.manual_seed``, ``seed_everything``, ...)."""
        return bool(self.call_names & SEED_CALLS) or any(
            n.endswith((".manual_seed", "seed_everything")) for n in self.call_names
        )

    def asks_for_determinism(self) -> bool:
        """``use_deterministic_algorithms(True)``, ``samebits.deterministic``, or an assignment of
        True to ``cudnn.deterministic`` or a misspelling of it (which sets nothing, but says the
        intent); in a file that seeds RNGs, any value but False (``= args.deterministic``)."""
        for call in self.calls:
            name = self.dotted(call.func) or ""
            if name == "torch.use_deterministic_algorithms" and call.args and _truthy(call.args[0]):
                return True
            if name in ("samebits.deterministic", "deterministic") or name.endswith(".enable_full_determinism"):
                return True
        seeds = None
        for _, target, value in self.attribute_assignments():
            if not _determinism_attr(target) or _falsy(value):
                continue
            seeds = self.seeds_rngs() if seeds is None else seeds
            if _truthy(value) or seeds:
                return True
        return False

    def attribute_assignments(self) -> Iterator[tuple[ast.Assign, str, ast.AST]]:
        """``(statement, dotted target, value)`` for each assignment to an attribute, tuples unpacked
        (``cudnn.benchmark, cudnn.deterministic = True, False``)."""
        for node in self.nodes:
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                else:
                    pairs = [(target, node.value)]
                for t, v in pairs:
                    name = self.dotted(t) if isinstance(t, ast.Attribute) else None
                    if name:
                        yield node, name, v


def loads_in_main_process(call: ast.Call) -> bool:
    """A ``DataLoader(...)`` call without worker processes: ``num_workers`` not given, or 0."""
    workers = next((k.value for k in call.keywords if k.arg == "num_workers"), None)
    return workers is None or (isinstance(workers, ast.Constant) and workers.value == 0)


def seeds_every_rng(names: set[str]) -> bool:
    """Whether calls of these dotted ``names`` seed torch's RNG and Python's or NumPy's too
    (``torch.manual_seed`` with ``random.seed`` or ``np.random.seed``): what a seed-everything
    helper does, for runs that repeat."""
    torch_seeded = any(n in SEED_CALLS and n.startswith("torch.") for n in names)
    return torch_seeded and bool(names & {"random.seed", "numpy.random.seed"})


def _determinism_attr(target: str) -> bool:
    """``torch.backends.cudnn.deterministic`` or a misspelling of its last part
    (``determinstic``, ``deterministc``, ``determenistic``)."""
    import difflib

    owner, _, attr = target.rpartition(".")
    if not owner.endswith("cudnn"):
        return False
    return attr.startswith("determin") or difflib.SequenceMatcher(None, attr, "deterministic").ratio() >= 0.8


def _loads_weights(call: ast.Call) -> bool:
    """``resnet50(weights=...)``, ``create_model(..., pretrained=True)``: trained weights, so inference."""
    for k in call.keywords:
        if k.arg in ("weights", "pretrained", "checkpoint_path") and not (
            isinstance(k.value, ast.Constant) and k.value.value in (None, False, "")
        ):
            return True
    return False


def _builds_optimizer(made: str) -> bool:
    """``torch.optim.AdamW``, ``optim.SGD``, ``Lion``: an optimizer class (not an LR scheduler)."""
    parts = made.split(".")
    if "lr_scheduler" in parts or "swa_utils" in parts or not parts[-1][:1].isupper():
        return False
    return ("optim" in parts[:-1] and parts[0] in ("torch", "optim")) or parts[-1] in OPTIMIZERS


OPTIMIZERS = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS", "Lion"}


def _named_like_optimizer(name: str) -> bool:
    """``optimizer``, ``opt``, ``self.optim``, ``g_optimizer``: named like an optimizer."""
    last = name.split(".")[-1].lower()
    return last in ("opt", "optim") or "optimizer" in last or last.endswith(("_opt", "_optim"))


def _truthy(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _falsy(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """``{"np": "numpy", "nn": "torch.nn", "Net": ".models.Net"}`` (a leading dot: relative)."""
    out: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
            module = "." * node.level + (f"{node.module}." if node.module else "")  # .models.Net: relative
            for a in node.names:
                out[a.asname or a.name] = f"{module}{a.name}"
    return out


def _module_classes(tree: ast.Module, ctx: FileContext) -> set[str]:
    """Classes of this file that subclass an ``nn.Module`` (directly or through another such class)."""
    found: set[str] = set()
    changed = True
    classes = [n for n in ctx.nodes if isinstance(n, ast.ClassDef)]
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


def _tensor_names(ctx: FileContext) -> set[str]:
    """Names bound to a tensor: a ``torch.*`` tensor factory, or arithmetic and method calls on
    one (``x = (torch.from_numpy(a).float() - mean).unsqueeze(0)``), in the order of the file."""
    names: set[str] = set()

    def tensor(value: ast.AST) -> bool:
        while isinstance(value, ast.Call):
            if (ctx.dotted(value.func) or "") in TENSOR_FACTORIES:
                return True
            if not isinstance(value.func, ast.Attribute):
                return False
            value = value.func.value  # any method of a tensor gives a tensor (near enough for SB202)
        if isinstance(value, ast.BinOp):
            return tensor(value.left) or tensor(value.right)
        return isinstance(value, ast.Name) and value.id in names

    assigns = sorted((n for n in ctx.nodes if isinstance(n, ast.Assign)), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        if tensor(node.value):
            names.update(n for n in (ctx.name_of(t) for t in node.targets) if n)
    return names
