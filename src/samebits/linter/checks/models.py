"""Model recognition, shared by every rule: which names and ``self.`` attributes hold a model,
where each came from (a source in :data:`LIBRARY` or this file), and whether that source starts
in training mode. Scopes are Python's: a name bound in a function is that function's, a name
used but not bound there is the module's, ``self.x`` is its class's in every method."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samebits.linter.checks.common import FileContext


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a model came from. ``train``: True when it starts in training mode (it needs
    ``.eval()``), False when it is in eval mode already, None when that cannot be told here.
    ``manages_grad``: the object handles eval and no-grad itself (ultralytics, pipelines)."""

    what: str
    train: bool | None
    manages_grad: bool = False
    where: str = ""  # another file's ``path:line`` where the evidence is (the project index)


NN = Source("a torch.nn layer", True)
FILE_CLASS = Source("an nn.Module class of this file", True)
SELF_EVAL_CLASS = Source("a class of this file that puts itself in eval mode", False)
USER_CLASS = Source("a class imported from your package", True)
TORCHVISION = Source("a torchvision constructor", True)
TIMM = Source("timm.create_model", True)
HUB = Source("torch.hub.load", True)
SCRIPTED = Source("TorchScript", None)
EXPORTED = Source("torch.export's .module()", None)  # .eval() raises on it in torch 2.13
PRETRAINED = Source("from_pretrained", False)  # transformers and diffusers return eval mode
FROM_CONFIG = Source("from_config", True)
SELF_MANAGED = Source("a predictor that handles eval and grad itself", None, manages_grad=True)
FACTORY = Source("a model-loading function", None)
FUNCTION = Source("a function of this file that returns a model", True)
# methods that run a model's inference, counted as its forward (Tacotron's decoder loop, a sampler)
INFERENCE_METHODS = ("generate", "sample", "predict", "infer", "inference", "decode", "encode", "detect")
WRAPPED = Source("a wrapper of another model (it keeps that model's mode)", None)
WRAPPERS = ("DataParallel", "DistributedDataParallel", "torch.compile", "FullyShardedDataParallel")
CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")  # nn containers: no mode-dependent layer of their own

# Library constructors, matched on the dotted name (import aliases resolved). Documented in the
# rules' "Known limits".
LIBRARY: tuple[tuple[str, Source], ...] = (
    ("timm.create_model", TIMM),
    ("torch.hub.load", HUB),
    ("torch.jit.load", SCRIPTED),
    ("torch.jit.script", SCRIPTED),
    ("torch.jit.trace", SCRIPTED),
    ("ultralytics.", SELF_MANAGED),
    ("transformers.pipeline", SELF_MANAGED),
)
FACTORY_NAMES = ("create_model", "load_model", "build_model", "get_model")
NOT_MODEL = re.compile(r"(Tokenizer|Processor|FeatureExtractor|Config|Scheduler|Vocab)\w*$")
# Names that say preprocessing, not a model, where the binding cannot tell (a TorchScript file).
NOT_MODEL_NAME = re.compile(
    r"(^|_)(transforms?|tfms?|preprocess(or|ing)?|postprocess(or|ing)?|tokeni[sz]er|processor|normali[sz]er?|augment(er|ation)?s?)$",
    re.I,
)
PIPELINE = re.compile(r"Pipeline\w*$")
# Packages whose capitalised names are not user models (a class imported from elsewhere is).
KNOWN_PACKAGES = (
    "torch", "numpy", "PIL", "cv2", "transformers", "diffusers", "datasets", "tokenizers", "sklearn",
    "pandas", "flask", "fastapi", "pydantic", "typing", "collections", "dataclasses", "pathlib", "argparse",
    "cog", "gradio", "tqdm", "onnxruntime", "tensorrt", "albumentations", "matplotlib", "scipy", "requests",
)  # fmt: skip
EVAL_CHAIN = ("eval", "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory")


def binds_eval(value: ast.AST) -> bool:
    """``Net().to(d).eval()``: the bound value has been put in eval mode."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in EVAL_CHAIN + ("train",)
    ):
        if value.func.attr == "eval" or _train_false(value):
            return True
        value = value.func.value
    return False


def _train_false(call: ast.Call) -> bool:
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "train"
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value is False
    )


def is_eval_call(call: ast.AST) -> bool:
    """``x.eval()`` or ``x.train(False)``."""
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and (call.func.attr == "eval" or _train_false(call))
    )


def chain_base(node: ast.AST) -> ast.AST:
    """``model`` for ``model.to(d).eval()``, ``Net()`` for ``Net().cuda()``: the object before its
    chain of module methods that return the module itself."""
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in EVAL_CHAIN + ("train",)
    ):
        node = node.func.value
    return node


TORCHVISION_SUBPACKAGES = ("detection", "segmentation", "video", "quantization", "optical_flow")


def _torchvision_constructor(rest: list[str]) -> bool:
    """``resnet50``, ``detection.fasterrcnn_resnet50_fpn``, ``ResNet``: a model; ``*_Weights``,
    ``get_weight``, ``list_models`` and anything deeper (``X_Weights.DEFAULT.transforms``): not."""
    if not rest or len(rest) > 2 or (len(rest) == 2 and rest[0] not in TORCHVISION_SUBPACKAGES):
        return False
    last = rest[-1]
    return not (
        last.startswith("_")
        or last.endswith(("Weights", "_weights"))
        or last in ("get_weight", "list_models", "get_model_weights", "get_model_builder")
    )


def library_source(name: str) -> Source | None:
    """The model source a call of the dotted ``name`` is, by the name alone (a library
    constructor, a wrapper, a ``torch.nn`` layer), or None."""
    parts = name.split(".")
    last = parts[-1]
    owner = parts[-2] if len(parts) > 1 else ""
    if last in ("from_pretrained", "from_config", "from_single_file"):
        if NOT_MODEL.search(owner):
            return None
        if PIPELINE.search(owner):
            return SELF_MANAGED
        return FROM_CONFIG if last == "from_config" else PRETRAINED
    if name == "torch.export.load().module" or (last == "module" and "torch.export.load" in name):
        return EXPORTED
    if name.startswith("torchvision.models."):
        return TORCHVISION if _torchvision_constructor(name.split(".")[2:]) else None
    for prefix, source in LIBRARY:
        if name == prefix or (prefix.endswith(".") and name.startswith(prefix)):
            return source
    if name == "torch.compile" or last in WRAPPERS:
        return WRAPPED  # DataParallel(model) is no fresh model in training mode: the mode is the model's
    if name.startswith(("torch.nn.", "nn.")) and last[:1].isupper():
        if last in ("Parameter", "ParameterList", "ParameterDict", "Identity") or last.endswith("Loss"):
            return None  # a loss module (nn.CrossEntropyLoss) has no training-mode behaviour and is no model
        return NN
    return None


def source_of_call(ctx: FileContext, call: ast.Call) -> Source | None:
    """The model source a call is, or None (not a model, or not known to be one): a library's
    (:func:`library_source`), a class of this file, a class or factory of the project
    (linter/project.py), a class imported from your package and used as a module."""
    name = ctx.dotted(call.func) or ""
    last = name.split(".")[-1]
    found = library_source(name)
    if found is not None:
        return found
    project = ctx.project.call_source(ctx, call)
    if last in ctx.module_classes and (project is None or project.train):
        return SELF_EVAL_CLASS if last in self_eval_classes(ctx) else FILE_CLASS
    if project is not None:
        return project
    if isinstance(call.func, ast.Name) and call.func.id in ctx.user_classes:
        return USER_CLASS
    if name.endswith(FACTORY_NAMES):
        return TIMM if name.endswith("create_model") else FACTORY
    return None


def self_eval_classes(ctx: FileContext) -> set[str]:
    """Module classes of this file whose ``__init__`` calls ``self.eval()`` (or ``train(False)``)."""
    found = set()
    for cls in ctx.nodes:
        if isinstance(cls, ast.ClassDef) and cls.name in ctx.module_classes:
            init = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == "__init__"), None)
            if init is not None and any(
                is_eval_call(n) and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"  # type: ignore[attr-defined]
                for n in ast.walk(init)
            ):
                found.add(cls.name)
    return found


MODULE_METHODS = ("load_state_dict", "eval", "to", "cuda", "parameters", "state_dict", "half")


def user_classes(ctx: FileContext, tree: ast.Module) -> set[str]:
    """Capitalised names imported from the user's own modules (relative imports, or packages not
    in :data:`KNOWN_PACKAGES`) that this file treats as modules: an instance is
    ``.load_state_dict``-ed, ``.eval()``-ed or moved with ``.to``/``.cuda``."""
    imported: set[str] = set()
    for node in ctx.nodes:
        if isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level or (top and top not in KNOWN_PACKAGES and not top.startswith("torch")):
                imported.update(a.asname or a.name for a in node.names if (a.asname or a.name)[:1].isupper())
    if not imported:
        return set()

    def constructed(value: ast.AST) -> str | None:
        base = chain_base(value)
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in imported:
            return base.func.id
        return None

    instances: dict[str, str] = {}
    for node in ctx.nodes:
        if isinstance(node, ast.Assign) and (cls := constructed(node.value)):
            instances.update({n: cls for n in (ctx.name_of(t) for t in node.targets) if n})
    used: set[str] = set()
    for node in ctx.nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MODULE_METHODS:
            inner = node.func.value
            cls = constructed(inner) or instances.get(ctx.name_of(chain_base(inner)) or "")
            if cls:
                used.add(cls)
    return used


Scope = ast.AST  # a Module, a function, or (for self.x) a class
Key = tuple[int, str]  # (id of the scope node, "name" or "self.attr")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def same_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _bound_names(function: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound in ``function``'s own scope, names it declares global)."""
    bound: set[str] = set()
    declared: set[str] = set()
    args = function.args  # type: ignore[attr-defined]
    bound.update(a.arg for a in args.args + args.kwonlyargs + args.posonlyargs)
    bound.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for body in function.body:  # type: ignore[attr-defined]
        for node in same_scope(body):
            if isinstance(node, ast.Global):
                declared.update(node.names)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (*FUNCTIONS, ast.ClassDef)) and node is not body:
                bound.add(node.name)
    return bound - declared, declared


class Models:
    """The model facts of one file (see the module docstring)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.module = ctx.tree
        self.locals: dict[int, set[str]] = {
            id(node): _bound_names(node)[0] for node in ctx.nodes if isinstance(node, FUNCTIONS)
        }
        self.sources: dict[Key, list[Source]] = {}
        self.classes: dict[Key, str] = {}  # models made by a class of this file: its name
        self.not_models: set[Key] = set()
        self.wrappers: dict[Key, Key] = {}  # torch.compile(model) and the like -> the model they wrap
        self.unknown: set[Key] = set()  # bound to a call of something not known here (a library's class)
        self.returns: dict[int, list[Source | None]] = {}  # function -> sources of its return value(s)
        self.methods: dict[int, dict[str, ast.AST]] = {
            id(c): {f.name: f for f in c.body if isinstance(f, FUNCTIONS)}
            for c in ctx.nodes
            if isinstance(c, ast.ClassDef)
        }
        self.functions = {f.name: f for f in ctx.tree.body if isinstance(f, FUNCTIONS)}
        for name, dotted in ctx.aliases.items():  # from model import model: a model made in another file
            imported = ctx.project.instance_source(ctx, dotted)
            if imported is not None:
                self.sources[(id(self.module), name)] = [imported]
        for _ in range(3):  # functions returning models of functions returning models
            before = dict(self.returns)
            self._collect()
            if self.returns == before:
                break
        self.evaluated_somewhere = self._evaluated_somewhere()

    # -- where a name lives

    def scope_of(self, node: ast.AST) -> Scope:
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, (*FUNCTIONS, ast.Lambda)):
                return parent
        return self.module

    def key(self, node: ast.AST) -> Key | None:
        """The key of a ``name`` or ``self.attr`` expression where it stands (a comprehension's
        target is its own: ``[m(x) for m in models]``'s ``m`` is an element of unknown mode)."""
        if isinstance(node, ast.Name):
            for parent in self.ctx.ancestors(node):
                if isinstance(parent, (*FUNCTIONS, ast.Lambda, ast.ClassDef)):
                    break
                if isinstance(parent, COMPREHENSIONS) and any(
                    isinstance(t, ast.Name) and t.id == node.id for g in parent.generators for t in ast.walk(g.target)
                ):
                    return (id(parent), node.id)
            scope = self.scope_of(node)
            while scope is not self.module and node.id not in self.locals.get(id(scope), set()):
                scope = self.scope_of(scope)
            return (id(scope), node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            cls = next((p for p in self.ctx.ancestors(node) if isinstance(p, ast.ClassDef)), None)
            return (id(cls), f"self.{node.attr}") if cls is not None else None
        return None

    # -- what a value is

    def value_sources(self, value: ast.AST, targets: int = 1) -> list[Source | None]:
        """The sources of the ``targets`` values an expression gives (a tuple gives several)."""
        if isinstance(value, ast.Tuple):
            return [self.value_source(v) for v in value.elts] if len(value.elts) == targets else [None] * targets
        base = chain_base(value)
        if isinstance(base, ast.Call):
            returned = self._returned(base)
            if returned is not None:
                return returned if len(returned) == targets else [None] * targets
        return [self.value_source(value)] + [None] * (targets - 1)

    def value_source(self, value: ast.AST) -> Source | None:
        base = chain_base(value)
        if isinstance(base, ast.Call):
            returned = self._returned(base)
            if returned is not None:
                return returned[0] if len(returned) == 1 else None
            if (self.ctx.dotted(base.func) or "") == "torch.load" and base is value:
                return FACTORY  # a whole pickled model, or a state dict: known only by its use
            found = source_of_call(self.ctx, base)
            if found is WRAPPED and base.args:  # torch.compile(model): the wrapped model's source and mode
                return self.value_source(base.args[0]) or found
            return found
        key = self.key(base)
        if key is not None and key in self.sources:
            return self.sources[key][-1]
        return None

    def wrapped(self, value: ast.AST) -> Key | None:
        """The key of the model whose mode ``value`` shares: the model it wraps
        (``torch.compile(model)``, ``DataParallel(net)``), or the one whose modules it is rebuilt
        from (:meth:`rebuilt_from`)."""
        base = chain_base(value)
        if isinstance(base, ast.Call) and base.args and source_of_call(self.ctx, base) is WRAPPED:
            return self.key(chain_base(base.args[0]))
        return self.rebuilt_from(base)

    def rebuilt_from(self, value: ast.AST) -> Key | None:
        """``nn.Sequential(*list(vgg.children())[:31])``, ``nn.ModuleList(net.features)``: a
        container made of one model or its own modules, which keep that model's mode (a container
        adds no Dropout or BatchNorm of its own). The key of that model, when every argument is
        made from it alone."""
        if not (isinstance(value, ast.Call) and value.args and not value.keywords):
            return None
        name = self.ctx.dotted(value.func) or ""
        if not (name.startswith(("torch.nn.", "nn.")) and name.rsplit(".", 1)[-1] in CONTAINERS):
            return None
        found: set[Key] = set()
        for arg in value.args:
            part = arg.value if isinstance(arg, ast.Starred) else arg
            models = {
                k
                for n in ast.walk(part)
                if isinstance(n, (ast.Name, ast.Attribute))
                and self.ctx.name_of(n) is not None
                and self.is_model(n)
                and (k := self.key(n)) is not None
            }
            if len(models) != 1:
                return None  # a fresh layer (``nn.Dropout()``), or modules of two models
            found |= models
        return found.pop() if len(found) == 1 else None

    def _returned(self, call: ast.Call) -> list[Source | None] | None:
        func = call.func
        target: ast.AST | None = None
        if isinstance(func, ast.Name):
            target = self.functions.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = next((p for p in self.ctx.ancestors(call) if isinstance(p, ast.ClassDef)), None)
            target = self.methods.get(id(cls), {}).get(func.attr) if cls is not None else None
        if target is None or id(target) not in self.returns:
            return None
        return self.returns[id(target)]

    def _collect(self) -> None:
        for node in self.ctx.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    for name, source in zip(names, self.value_sources(node.value, len(names))):
                        key = self.key(name)
                        if key is None:
                            continue
                        if source is not None:
                            if source not in self.sources.setdefault(key, []):
                                self.sources[key].append(source)
                            if source in (FILE_CLASS, SELF_EVAL_CLASS) and len(names) == 1:
                                self._class_from(key, chain_base(node.value))
                            inner = self.wrapped(node.value) if len(names) == 1 else None
                            if inner is not None and inner != key:
                                self.wrappers[key] = inner
                        elif _not_model_value(self.ctx, node.value, len(names)):
                            self.not_models.add(key)
                        elif isinstance(chain_base(node.value), ast.Call):
                            self.unknown.add(key)
        for function in [n for n in self.ctx.nodes if isinstance(n, FUNCTIONS)]:
            self.returns[id(function)] = self._summary(function)

    def _class_from(self, key: Key, base: ast.AST) -> None:
        """Record the class of this file that made the model ``key`` is bound to: ``Net`` of
        ``Net(...)``, or the class of the model it is copied from (``model = model.to(device)``)."""
        if isinstance(base, ast.Call):
            self.classes[key] = (self.ctx.dotted(base.func) or "").rsplit(".")[-1]
        elif (found := self.classes.get(self.key(base) or (0, ""))) is not None:
            self.classes[key] = found

    def _summary(self, function: ast.AST) -> list[Source | None]:
        returns: list[tuple[ast.AST, set[Key]]] = []
        flow = Flow(self, function, on_return=lambda value, state: returns.append((value, state)))
        flow.run()
        merged: list[Source | None] | None = None
        for value, state in returns:
            parts = value.elts if isinstance(value, ast.Tuple) else [value]
            sources = []
            for part in parts:
                source = self.value_source(part)
                key = self.key(chain_base(part))
                if source is not None and source.train and (binds_eval(part) or (key is not None and key in state)):
                    source = FUNCTION_EVAL
                elif source is not None and source.train:
                    source = FUNCTION
                sources.append(source)
            if merged is None:
                merged = sources
            elif len(merged) == len(sources):
                merged = [a if a is not None and a.train else b for a, b in zip(merged, sources)]
        return merged or []

    def _evaluated_somewhere(self) -> set[Key]:
        keys: set[Key] = set()
        for node in self.ctx.nodes:
            if is_eval_call(node):
                base = chain_base(node.func.value)  # type: ignore[attr-defined]
                if isinstance(base, ast.Name) and base.id == "self":
                    cls = next((p for p in self.ctx.ancestors(node) if isinstance(p, ast.ClassDef)), None)
                    keys.update(k for k in self.sources if cls is not None and k[0] == id(cls))
                key = self.key(base)
                if key is not None:
                    keys.add(key)
            elif isinstance(node, ast.Assign) and binds_eval(node.value):
                keys.update(k for k in (self.key(t) for t in node.targets) if k)
        for _ in range(3):  # a wrapper of a model eval'd somewhere (before or after wrapping)
            keys.update(w for w, inner in self.wrappers.items() if inner in keys)
        return keys

    # -- what rules ask

    def source(self, node: ast.AST) -> Source | None:
        key = self.key(node)
        found = self.sources.get(key) if key else None
        return found[-1] if found else None

    def is_model(self, node: ast.AST) -> bool:
        """A model by its binding, or by its name (``model``, ``net``, ``self.backbone``) unless it is
        bound to a non-model (a tokenizer, a tensor) or to a predictor that handles grad itself."""
        from samebits.linter.checks.common import MODULE_NAME

        key = self.key(node)
        if key is None:
            return False
        found = self.sources.get(key)
        if found and all(s.train is None for s in found) and NOT_MODEL_NAME.search(key[1].removeprefix("self.")):
            return False  # transform = torch.jit.load("transform.pt"): a scripted preprocessing step
        if found:
            return not all(s.manages_grad for s in found)
        if key in self.not_models or key[1] in self.ctx.tensors:
            return False
        if isinstance(node, ast.Name) and (node.id in self.ctx.not_variables or _class_name(node.id)):
            return False  # Net(...) of a class defined elsewhere builds a model, it runs none
        return bool(MODULE_NAME.search(key[1].removeprefix("self.")))

    def called_model(self, call: ast.AST) -> ast.AST | None:
        """The model expression of ``model(x)`` / ``model.forward(x)`` / ``model.generate(x)`` (and
        the other inference methods of :data:`INFERENCE_METHODS`), when it is a model. A
        transformers model's ``generate`` is not counted: it turns grad off itself."""
        if not isinstance(call, ast.Call):
            return None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        elif isinstance(func, ast.Attribute) and func.attr in INFERENCE_METHODS:
            source, key = self.source(func.value), self.key(func.value)
            if func.attr == "generate" and source in (PRETRAINED, FROM_CONFIG):
                return None
            if (source is None and key in self.unknown) or source in (USER_CLASS, FACTORY):
                return None  # SentenceTransformer(...).encode, whisper.load_model(...).decode: may handle grad itself
            func = func.value
        return func if self.ctx.name_of(func) is not None and self.is_model(func) else None

    def class_of(self, node: ast.AST) -> str | None:
        """The class of this file that made the model ``node`` holds, if one did."""
        key = self.key(node)
        return self.classes.get(key) if key else None

    def starts_in_training(self, node: ast.AST) -> bool:
        key = self.key(node)
        found = self.sources.get(key) if key else None
        return found is not None and any(s.train for s in found)

    def unevaluated_calls(self) -> list[tuple[ast.Call, str, str]]:
        """SB107: model calls reached on some path without ``.eval()``, first per model: the call,
        the model's name, and the project function that runs it (``""``: the call itself)."""
        found: dict[Key, tuple[ast.Call, str, str]] = {}
        scopes = [self.module, *(n for n in self.ctx.nodes if isinstance(n, FUNCTIONS))]
        for scope in scopes:
            Flow(self, scope, on_use=lambda call, key, name, via: found.setdefault(key, (call, name, via))).run()
        return sorted(found.values(), key=lambda item: (item[0].lineno, item[0].col_offset))


def _class_name(name: str) -> bool:
    """``Net``, ``UNet``: a CamelCase name, by convention a class (``MODEL`` is a constant)."""
    return name[:1].isupper() and not name.isupper()


FUNCTION_EVAL = Source("a function of this file that returns it in eval mode", False)


def _not_model_value(ctx: FileContext, value: ast.AST, targets: int) -> bool:
    base = chain_base(value)
    if isinstance(base, ast.Call):
        name = ctx.dotted(base.func) or ""
        parts = name.split(".")
        return len(parts) > 1 and parts[-1] in ("from_pretrained", "from_config") and bool(NOT_MODEL.search(parts[-2]))
    return isinstance(value, ast.Constant)


class Flow:
    """One pass over a scope's statements in order, tracking which models of :class:`Models` are
    in eval mode on every path: ``if`` branches meet (a model is evaluated after them only if it
    is on each branch that goes on), a loop body may not run, ``return`` ends a path."""

    def __init__(self, models: Models, scope: ast.AST, on_use=None, on_return=None) -> None:
        self.m, self.scope = models, scope
        self.on_use, self.on_return = on_use, on_return
        self.aliases: dict[Key, Key] = {}  # a wrapper -> the model it wraps

    def run(self) -> None:
        self.block(list(getattr(self.scope, "body", [])), set(), initial=True)

    def evaluated(self, key: Key, state: set[Key], seen: frozenset[Key] = frozenset()) -> bool:
        if key in state:
            return True
        inner = self.aliases.get(key)
        if inner is not None and inner not in seen and self.evaluated(inner, state, seen | {key}):
            return True  # the wrapped model was eval'd (before or after wrapping): so is the wrapper
        if key[0] != id(self.scope):  # a global or a self attribute: evaluated anywhere counts
            return key in self.m.evaluated_somewhere
        return False

    def block(self, body: list[ast.stmt], state: set[Key], initial: bool = False) -> set[Key] | None:
        """The state after ``body``, or None when every path through it ended."""
        current: set[Key] | None = state
        for stmt in body:
            if current is None:
                return None
            current = self.statement(stmt, current)
        return current

    def statement(self, stmt: ast.stmt, state: set[Key]) -> set[Key] | None:
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            return state
        if isinstance(stmt, ast.If):
            self.expression(stmt.test, state)
            ends: list[set[Key] | None] = [self.block(stmt.body, set(state)), self.block(stmt.orelse, set(state))]
            going = [s for s in ends if s is not None]
            return set.intersection(*going) if going else None
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.expression(stmt.iter if not isinstance(stmt, ast.While) else stmt.test, state)
            entry = set(state)
            if not isinstance(stmt, ast.While):  # each element of a collection: its mode is not known here
                entry |= {k for k in map(self.m.key, ast.walk(stmt.target)) if k is not None}
            inside = self.block(stmt.body, entry)
            after = state & inside if inside is not None else set(state)
            return self.block(stmt.orelse, after) if stmt.orelse else after
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expression(item.context_expr, state)
            return self.block(stmt.body, state)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            tried = self.block(stmt.body, set(state))  # type: ignore[attr-defined]
            ends = [tried] + [self.block(h.body, set(state)) for h in stmt.handlers]  # type: ignore[attr-defined]
            going = [s for s in ends if s is not None]
            merged: set[Key] | None = set.intersection(*going) if going else None
            if stmt.finalbody and merged is not None:  # type: ignore[attr-defined]
                merged = self.block(stmt.finalbody, merged)  # type: ignore[attr-defined]
            return merged
        self.expression(stmt, state)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                sources = self.m.value_sources(stmt.value, len(names))
                for name, source in zip(names, sources):
                    key = self.m.key(name)
                    if key is None:
                        continue
                    base = self.m.key(chain_base(stmt.value)) if len(names) == 1 else None
                    carried = base is not None and base != key and base in state
                    inner = self.m.wrapped(stmt.value) if len(names) == 1 else None
                    if inner is not None and inner != key:  # a wrapper shares the wrapped model's mode
                        self.aliases[key] = inner
                        carried = carried or inner in state
                    elif inner == key:
                        carried = key in state  # model = torch.compile(model): as it was
                    unknown = source is None and base is None  # models[0], load_any(path): mode not known
                    if binds_eval(stmt.value) or carried or unknown or (source is not None and not source.train):
                        state.add(key)
                    elif base != key:
                        state.discard(key)
        if isinstance(stmt, ast.Return):
            if self.on_return is not None and stmt.value is not None:
                self.on_return(stmt.value, set(state))
            return None
        if isinstance(stmt, TERMINAL):
            return None
        return state

    def expression(self, node: ast.AST, state: set[Key]) -> None:
        calls = sorted((n for n in same_scope(node) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            if is_eval_call(call):
                key = self.m.key(chain_base(call.func.value))  # type: ignore[attr-defined]
                if key is not None:
                    state.add(key)
            elif isinstance(call.func, ast.Attribute) and call.func.attr == "train":
                key = self.m.key(chain_base(call.func.value))
                if key is not None:
                    state.discard(key)
            model = self.m.called_model(call)
            if model is not None:
                self.use(call, model, state, "")
            self.into_project(call, state)

    def use(self, call: ast.Call, model: ast.AST, state: set[Key], via: str) -> None:
        key = self.m.key(model)
        if self.on_use is not None and key is not None and self.m.starts_in_training(model):
            if not self.evaluated(key, state):
                self.on_use(call, key, self.m.ctx.name_of(model), via)

    def into_project(self, call: ast.Call, state: set[Key]) -> None:
        """A model passed to a project function: run by it (a use here), then eval'd by it."""
        project = self.m.ctx.project
        known = project.callee(self.m.ctx, call)
        for function, skip in known or project.callee(self.m.ctx, call, by_name=True):
            pairs = [(p, a) for p, a in project.arguments(function, call, skip) if self.m.key(a) is not None]
            evals, runs = project.param_facts(function, "evals"), project.param_facts(function, "calls")
            for param, arg in pairs if known else []:
                if param in runs and param not in evals and self.m.is_model(arg):
                    self.use(call, arg, state, f"{function.name}() of {function.where}")
            state.update(self.m.key(a) for p, a in pairs if p in evals)  # type: ignore[misc]
