"""The project a linted file lives in: what its other files define (nn.Module classes, factories
returning models, module-level models, functions that run a parameter under no_grad, eval it or
call it), so a model made or run in another file is known here. Each file is parsed once, its
summary (linter/summary.py) cached by content hash in memory and on disk as JSON; nothing is
imported or run. The project is the nearest folder up with ``.git``, ``pyproject.toml`` or
``setup.py`` (else the folder given)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from samebits.files import TooLarge, read_regular
from samebits.linter.cache import SummaryCache
from samebits.linter.checks.models import Source, library_source
from samebits.linter.summary import Summary, summarize

if TYPE_CHECKING:
    from samebits.linter.checks.common import FileContext

MARKERS = (".git", "pyproject.toml", "setup.py")
MAX_FILES = 2000
MAX_BYTES = 1_000_000
MODULE_BASES = ("nn.Module", "LightningModule", "PreTrainedModel", "nn.Sequential", "ModelMixin")


def find_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` with a project marker."""
    start = path if path.is_dir() else path.parent
    for folder in [start, *start.parents]:
        if any((folder / m).exists() for m in MARKERS):
            return folder
    return None


def module_name(path: Path, root: Path) -> str:
    """``pkg.models`` for ``root/pkg/models.py`` (``root/src/pkg/...`` too), ``pkg`` for its ``__init__.py``."""
    try:
        parts = list(path.resolve().relative_to(root.resolve()).with_suffix("").parts)
    except ValueError:
        parts = [path.stem]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    return ".".join(parts)


@dataclasses.dataclass(frozen=True)
class Def:
    """A class, function, method or module-level instance of the project."""

    module: str
    kind: str  # "class", "function", "instance"
    name: str
    data: Summary
    where: str  # "models/net.py:12"
    cls: str = ""  # a method's class


class Project:
    """The summaries of a project's files, and what a call or a name in one of them refers to."""

    def __init__(self, modules: dict[str, Summary], paths: dict[str, str], notes: list[str] | None = None) -> None:
        self.modules, self.paths = modules, paths
        self.notes = notes or []  # files skipped, each with why
        self._resolved: dict[tuple[str, str], Def | None] = {}
        self._methods: dict[str, list[Def]] | None = None

    @classmethod
    def build(cls, root: Path, files: list[Path], cache: SummaryCache | None = None) -> Project:
        """Summarise up to :data:`MAX_FILES` files of ``root`` (each under :data:`MAX_BYTES`)."""
        modules: dict[str, Summary] = {}
        paths: dict[str, str] = {}
        notes: list[str] = []
        cache = cache or SummaryCache(None)
        for path in files[:MAX_FILES]:
            try:
                data = read_regular(path, MAX_BYTES)
            except TooLarge:
                notes.append(f"{path}: not indexed (over {MAX_BYTES} bytes, or binary)")
                continue
            except OSError as exc:
                notes.append(f"{path}: cannot read ({exc.strerror})")
                continue
            if b"\x00" in data[:4096]:
                notes.append(f"{path}: not indexed (over {MAX_BYTES} bytes, or binary)")
                continue
            summary = cache.get(hashlib.sha256(data).hexdigest(), lambda d=data: _parse(d))  # type: ignore[misc]
            if summary is None:
                notes.append(f"{path}: not indexed (it does not parse)")
                continue
            name = module_name(path, root)
            modules[name] = summary
            try:
                paths[name] = path.resolve().relative_to(root.resolve()).as_posix()
            except ValueError:
                paths[name] = path.as_posix()
        if len(files) > MAX_FILES:
            notes.append(f"{root}: only the first {MAX_FILES} of {len(files)} files indexed")
        cache.save()
        return cls(modules, paths, notes)

    @classmethod
    def of_tree(cls, tree: ast.Module, display: str = "<string>") -> Project:
        """One file alone (``lint_source``): its own classes and functions."""
        return cls({"": summarize(tree)}, {"": display})

    # -- what a dotted name refers to

    def find_module(self, name: str, near: str) -> str | None:
        """The project module ``name`` imported from module ``near``: exact, a sibling of
        ``near`` (a script next to it), or the one module whose name ends with it."""
        if name in self.modules:
            return name
        package = near.rpartition(".")[0]
        if package and f"{package}.{name}" in self.modules:
            return f"{package}.{name}"
        ends = [m for m in self.modules if m.endswith(f".{name}")]
        return ends[0] if len(ends) == 1 else None

    def resolve(self, dotted: str, module: str, depth: int = 0) -> Def | None:
        """The project definition ``dotted`` (as module ``module`` writes it) refers to."""
        key = (dotted, module)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(dotted, module, depth)
        return self._resolved[key]

    def _resolve(self, dotted: str, module: str, depth: int) -> Def | None:
        if depth > 5 or not dotted or module not in self.modules:
            return None
        if dotted.startswith("."):
            level = len(dotted) - len(dotted.lstrip("."))
            package = (
                module.split(".") if self.paths.get(module, "").endswith("__init__.py") else module.split(".")[:-1]
            )
            base = package[: len(package) - (level - 1)] if level > 1 else package
            dotted = ".".join([*base, dotted.lstrip(".")])
        parts = dotted.split(".")
        found = self._local(module, parts, depth)
        if found is not None or parts[0] not in self._imported_tops(module):
            return found  # obj.method of a local object is no module's
        for i in range(len(parts) - 1, 0, -1):
            target = self.find_module(".".join(parts[:i]), module)
            if target is not None:
                return self._local(target, parts[i:], depth)
        return None

    def _imported_tops(self, module: str) -> set[str]:
        return {v.lstrip(".").split(".")[0] for v in self.modules[module]["imports"].values()} | {module.split(".")[0]}

    def _local(self, module: str, parts: list[str], depth: int) -> Def | None:
        """``parts`` looked up in ``module``: a class (``Net``, ``Net.method``), function or
        instance defined there, or a name it imports (followed, a re-export in ``__init__``)."""
        summary = self.modules[module]
        path = self.paths.get(module, module)
        head = parts[0]
        if head in summary["classes"]:
            cls = summary["classes"][head]
            if len(parts) == 1:
                return Def(module, "class", head, cls, f"{path}:{cls['line']}")
            method = cls["methods"].get(parts[1]) if len(parts) == 2 else None
            return Def(module, "function", parts[1], method, f"{path}:{method['line']}", head) if method else None
        if len(parts) == 1 and head in summary["functions"]:
            f = summary["functions"][head]
            return Def(module, "function", head, f, f"{path}:{f['line']}")
        if len(parts) == 1 and head in summary["instances"]:
            i = summary["instances"][head]
            return Def(module, "instance", head, i, f"{path}:{i['line']}")
        imported = summary["imports"].get(head)
        if imported and imported != head:
            return self.resolve(".".join([imported, *parts[1:]]), module, depth + 1)
        return None

    def method(self, owner: Def | str, name: str, module: str = "") -> Def | None:
        """Method ``name`` of a class (its own or a project base's)."""
        cls = owner if isinstance(owner, Def) else self.resolve(owner, module)
        for _ in range(5):
            if cls is None or cls.kind != "class":
                return None
            found = self._local(cls.module, [cls.name, name], 0)
            if found is not None:
                return found
            bases = [self.resolve(b, cls.module) for b in cls.data["bases"]]
            cls = next((b for b in bases if b is not None and b.kind == "class"), None)
        return None

    def methods_named(self, name: str) -> list[Def]:
        """Every project method called ``name`` (for ``obj.name(...)`` on an object of unknown class)."""
        if self._methods is None:
            self._methods = {}
            for m, summary in self.modules.items():
                for cn, c in summary["classes"].items():
                    for fn, f in c["methods"].items():
                        where = f"{self.paths.get(m, m)}:{f['line']}"
                        self._methods.setdefault(fn, []).append(Def(m, "function", fn, f, where, cn))
        return self._methods.get(name, [])

    # -- models

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one Project per lint run
    def is_model_class(self, module: str, name: str, depth: int = 0) -> bool:
        """An nn.Module subclass, directly or through project classes."""
        cls = self.modules.get(module, {}).get("classes", {}).get(name)
        if cls is None or depth > 8:
            return False
        for base in cls["bases"]:
            if base.endswith(MODULE_BASES):
                return True
            found = self.resolve(base, module)
            if found is not None and found.kind == "class" and self.is_model_class(found.module, found.name, depth + 1):
                return True
        return False

    def source(self, found: Def | None, module: str, depth: int = 0) -> Source | None:
        """The model source a project class, factory or instance is."""
        if found is None or depth > 4:
            return None
        if found.kind == "class":
            if not self.is_model_class(found.module, found.name):
                return None
            eval_ = found.data["self_eval"]
            what = f"{found.name}, an nn.Module class of {found.where}" + (
                " that puts itself in eval mode" if eval_ else ""
            )
            return Source(what, not eval_, where=found.where)
        made = found.data["returns"][0] if found.kind == "function" and found.data["returns"] else None
        callee, evaluated = (
            (made or ["", False]) if found.kind == "function" else (found.data["call"], found.data["eval"])
        )
        if "|" in callee:  # REGISTRY[name](...): a model when every class of the registry is one
            options = [self.source(self.resolve(c, found.module), found.module, depth + 1) for c in callee.split("|")]
            inner = options[0] if all(options) and len({o.train for o in options if o}) == 1 else None
        else:
            inner = self.source(self.resolve(callee, found.module), found.module, depth + 1) or library_source(callee)
        if inner is None and found.kind == "instance" and evaluated:
            made = self.resolve(callee, found.module)
            if made is not None and made.kind == "class":  # model = Net(); model.eval(): Net's base is a library's
                return Source(f"made in {found.where}", False, where=found.where)
        if inner is None:
            return None
        train = None if inner.train is None else inner.train and not evaluated
        if found.kind == "instance":
            train = train and not self._evaluated_by_importers(found)
            return Source(f"made in {found.where}", train, inner.manages_grad, found.where)
        state = "in eval mode" if train is False else "in training mode" if train else "a model"
        return Source(
            f"{found.name}() of {found.where}, which returns it {state}", train, inner.manages_grad, found.where
        )

    def _evaluated_by_importers(self, instance: Def) -> bool:
        """A module-level model that a file importing it puts in eval mode (``model.eval()`` in
        an app's ``setup()``): the order of calls between files is not known, so it counts."""
        for module, summary in self.modules.items():
            for local, dotted in summary["imports"].items():
                if local in summary["evaluated"] and dotted.endswith(instance.name):
                    if self.resolve(dotted, module) == instance:
                        return True
        return False

    def call_source(self, ctx: FileContext, call: ast.Call) -> Source | None:
        """The model source of ``call``: a project class (one whose ``__init__`` evals the model
        it is given: in eval mode), or a function of the project that returns a model."""
        found = self.callee_def(ctx, call)
        if found is None or (found.kind == "function" and found.cls):
            return None
        if found.kind == "class":
            init = self.method(found, "__init__")
            if init is not None and any(p in init.data["evals"] for p, _ in self.arguments(init, call, 1)):
                return Source(f"{found.name} of {found.where}, which puts the model it wraps in eval mode", False)
        return None if found.module == ctx.module else self.source(found, ctx.module)  # this file's: models.py

    def instance_source(self, ctx: FileContext, dotted: str) -> Source | None:
        """``from model import model``: the project's module-level model that a name imports."""
        found = self.resolve(dotted, ctx.module)
        return self.source(found, ctx.module) if found is not None and found.kind == "instance" else None

    # -- calls into the project

    def callee_def(self, ctx: FileContext, call: ast.Call) -> Def | None:
        """The project class or function a call runs (``f()``, ``mod.f()``, ``self.m()``)."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = next((p for p in ctx.ancestors(call) if isinstance(p, ast.ClassDef)), None)
            return self.method(cls.name, func.attr, ctx.module) if cls is not None else None
        name = ctx.dotted(func)
        return self.resolve(name, ctx.module) if name and "(" not in name else None

    def callee(self, ctx: FileContext, call: ast.Call, by_name: bool = False) -> list[tuple[Def, int]]:
        """The project functions ``call`` runs, each with how many leading parameters the call
        does not fill (1 for a method or a class's ``__init__``). With ``by_name``, a method of
        an object of unknown class is every project method of that name (only for facts that
        remove findings: a name such as ``call`` is too common to add one)."""
        found = self.callee_def(ctx, call)
        if found is not None and found.kind == "class":
            init = self.method(found, "__init__")
            return [(init, 1)] if init is not None else []
        if found is not None and found.kind == "function":
            return [(found, 1 if found.cls else 0)]
        if found is not None or not by_name:
            return []
        methods = [
            m for m in _bound_methods(ctx, call.func) if (ctx.dotted(m.value) or "").split(".")[0] not in ctx.aliases
        ]
        return [(d, 1) for m in methods for d in self.methods_named(m.attr)]

    @staticmethod
    def arguments(function: Def, call: ast.Call, skip: int) -> list[tuple[str, ast.AST]]:
        """``(parameter, argument)`` pairs of ``call`` into ``function``."""
        positional = function.data["positional"][skip:]
        pairs: list[tuple[str, ast.AST]] = [
            (positional[i], a)
            for i, a in enumerate(call.args)
            if i < len(positional) and not isinstance(a, ast.Starred)
        ]
        pairs += [(k.arg, k.value) for k in call.keywords if k.arg is not None and k.arg in function.data["params"]]
        return pairs

    def param_facts(self, function: Def, fact: str, depth: int = 0) -> set[str]:
        """Parameters that ``function`` evals / runs / runs under no_grad (``fact``: ``evals``,
        ``calls``, ``forwards``, ``no_grad``), also by passing them on to a project function that
        does (followed a few calls deep)."""
        out = set(function.data[fact])
        if depth > 3:
            return out
        for param, callee, position in function.data["passes"]:
            if param in out:
                continue
            for target, skip in self._passed_to(function, callee):
                positional = target.data["positional"][skip:]
                name = positional[position] if isinstance(position, int) and position < len(positional) else position
                if name in self.param_facts(target, fact, depth + 1):
                    out.add(param)
        return out

    def _passed_to(self, function: Def, callee: str) -> list[tuple[Def, int]]:
        if callee.startswith("self.") and function.cls:
            found = self.method(
                Def(function.module, "class", function.cls, self.modules[function.module]["classes"][function.cls], ""),
                callee[5:],
            )
            return [(found, 1)] if found is not None else []
        if callee.startswith("?."):
            return [(d, 1) for d in self.methods_named(callee[2:])]
        found = self.resolve(callee, function.module)
        if found is not None and found.kind == "class":
            init = self.method(found, "__init__")
            return [(init, 1)] if init is not None else []
        return [(found, 1 if found.cls else 0)] if found is not None and found.kind == "function" else []

    def fixed_size(self, ctx: FileContext, call: ast.Call) -> bool:
        """A call of a project function or class that resizes its input to one size."""
        found = self.callee_def(ctx, call)
        if found is not None and found.kind == "class":
            return any(m["fixed_size"] for m in found.data["methods"].values())
        return found is not None and found.kind == "function" and found.data["fixed_size"]

    def called_under_no_grad(self, module: str) -> set[str]:
        """Functions of ``module`` that some project file calls under no_grad, by name."""
        out = set()
        for other, summary in self.modules.items():
            for dotted in summary["no_grad_calls"]:
                found = self.resolve(dotted, other)
                if found is not None and found.module == module and found.kind == "function" and other != module:
                    out.add(found.name)
        return out


def _bound_methods(ctx: FileContext, func: ast.AST) -> list[ast.Attribute]:
    """``obj.m`` for ``obj.m(...)``; for ``sample_fn(...)`` the methods the name was bound to
    (``sample_fn = diffusion.p_sample_loop if a else diffusion.ddim_sample_loop``)."""
    if isinstance(func, ast.Attribute):
        return [func]
    if not isinstance(func, ast.Name):
        return []
    return ctx.bound_attributes.get(func.id, [])


def _parse(data: bytes) -> Summary | None:
    from samebits.linter.engine import read_python

    try:
        return summarize(ast.parse(read_python(data)))
    except (SyntaxError, ValueError, UnicodeDecodeError, LookupError, RecursionError, MemoryError):
        return None
