"""The output tree: the one walk over model inputs and outputs.

Every capability walks inputs and outputs through this module: paths (:func:`flatten`), a map
over tensors (:func:`map_tensors`), rows along the batch dimension (:func:`take`, :func:`row`,
:func:`join`, :func:`stack`) and the JSON skeleton stored in goldens (:func:`skeleton`,
:func:`unskeleton`).

A *node* rule says how to walk one kind of object: its children with their path pieces, how to
rebuild it from new children, and (optionally) where each child keeps its rows. samebits' own
rules are consulted first (NamedTuple, transformers ``ModelOutput`` and ``Cache``, dataclass,
dict, list, tuple), then torch's pytree registry; users add theirs with :func:`register_node`.
Nothing is registered in torch's global registry. Leaves are tensors, NumPy arrays, ``None``,
numbers, strings and bytes; anything else is a :class:`UnknownNode` naming its path and type.

Rows follow one documented rule where no node rule says otherwise: a tensor whose size along
the batch dim is the batch size ``n`` holds one row per index; a *list* of length ``n`` holds one
entry per row (torchvision-style images, targets and detections); tuples, dicts and other nodes
hold rows in their children; every other leaf is shared by all rows. Where rows must be split
(``strict=True``, for outputs) a tensor without the batch dim is a :class:`RowError`: rows are
never dropped or guessed.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from samebits.errors import UserError

SCALARS = (int, float, bool, complex, str, bytes, type(None))
SKELETON_VERSION = 2


class TreeError(UserError):
    """An input or output that the tree cannot walk or split."""


class UnknownNode(TreeError, TypeError):
    """An object of a type the tree does not know (register it with :func:`register_node`)."""


class RowError(TreeError, ValueError):
    """Rows that cannot be split or joined (an output without the batch dimension, say)."""


_AS_GIVEN = object()  # a child's rows follow the generic rule


@dataclasses.dataclass(frozen=True)
class Node:
    """How to walk one kind of object.

    ``children(obj)`` lists ``(path piece, child)`` in walk order (pieces look like ``.name``,
    ``[0]`` or ``['key']``); ``rebuild(obj, new_children)`` returns an object like ``obj`` with
    those children. ``row_dims(obj)``, where given, names per child the dim that holds the rows
    of a tensor child (``None``: the child is not a row, e.g. a 0-d counter). ``keeps_batch``: a
    single row of this node keeps its batch dim (one sample of a cache is a cache of batch 1).
    """

    name: str
    children: Callable[[Any], list[tuple[str, Any]]]
    rebuild: Callable[[Any, list[Any]], Any]
    row_dims: Callable[[Any], list[int | None]] | None = None
    keeps_batch: bool = False


_RULES: list[tuple[Callable[[Any], bool], Node]] = []
_USER_RULES: list[tuple[Callable[[Any], bool], Node]] = []


def register_node(
    cls: type,
    *,
    children: Callable[[Any], list[tuple[str, Any]]],
    rebuild: Callable[[Any, list[Any]], Any],
    row_dims: Callable[[Any], list[int | None]] | None = None,
    keeps_batch: bool = False,
) -> None:
    """Teach samebits to walk objects of ``cls`` (and its subclasses); see :class:`Node`.

    Example, for a class holding two tensors::

        samebits.register_node(
            Boxes,
            children=lambda b: [(".xyxy", b.xyxy), (".scores", b.scores)],
            rebuild=lambda b, kids: Boxes(*kids),
        )
    """
    node = Node(cls.__qualname__, children, rebuild, row_dims, keeps_batch)
    _USER_RULES[:] = [(m, n) for m, n in _USER_RULES if n.name != node.name]

    def matches(obj: object, cls: type = cls) -> bool:
        return isinstance(obj, cls)

    _USER_RULES.insert(0, (matches, node))


# -- the built-in rules ------------------------------------------------------------------------
def _key_piece(key: Any) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"


def _key_order(key: Any) -> tuple[str, str]:
    return (type(key).__name__, str(key))


def _has_base(obj: object, module_prefix: str, name: str) -> bool:
    return any(c.__name__ == name and c.__module__.startswith(module_prefix) for c in type(obj).__mro__)


def is_namedtuple(obj: object) -> bool:
    """A NamedTuple instance (a tuple with ``_fields``)."""
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _dict_rebuild(obj: dict[Any, Any], kids: list[Any]) -> dict[Any, Any]:
    new = dict(zip(sorted(obj, key=_key_order), kids))
    items = [(k, new[k]) for k in obj]
    if type(obj) is dict:
        return dict(items)
    try:
        return type(obj)(items)
    except Exception:
        return dict(items)


def _with_attrs(obj: object, names: list[str], kids: list[Any]) -> Any:
    new = copy.copy(obj)
    for name, kid in zip(names, kids):
        object.__setattr__(new, name, kid)
    return new


def _dataclass_children(obj: Any) -> list[tuple[str, Any]]:
    return [(f".{f.name}", getattr(obj, f.name)) for f in dataclasses.fields(obj)]


def _dataclass_rebuild(obj: Any, kids: list[Any]) -> Any:
    return _with_attrs(obj, [f.name for f in dataclasses.fields(obj)], kids)


def _model_output_rebuild(obj: Any, kids: list[Any]) -> Any:
    return type(obj)(**dict(zip(obj.keys(), kids)))


# Cache layers of transformers 5.x: the tensors that hold rows, and the dim that holds them.
_LAYER_ROW_DIMS = {
    "keys": 0,
    "values": 0,
    "indexer_keys": 0,
    "indexer_position_ids": 1,
    "conv_states": 0,
    "recurrent_states": 0,
}


def _holds_tensors(value: object) -> bool:
    """A tensor, or a dict, list or tuple with a tensor among its values (Mamba's layers keep
    ``conv_states = {0: tensor}``)."""
    if isinstance(value, torch.Tensor):
        return True
    values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return any(isinstance(v, torch.Tensor) for v in values)


def _layer_tensors(layer: Any) -> list[str]:
    names = [k for k, v in vars(layer).items() if not k.startswith("_") and _holds_tensors(v)]
    order = list(_LAYER_ROW_DIMS)
    return sorted(names, key=lambda k: (order.index(k) if k in order else len(order), k))


def _layer_row_dims(layer: Any) -> list[int | None]:
    dims: list[int | None] = []
    for name in _layer_tensors(layer):
        value = getattr(layer, name)
        if name in _LAYER_ROW_DIMS:
            dims.append(_LAYER_ROW_DIMS[name])  # a dict or list of them: each of its tensors
        elif isinstance(value, torch.Tensor) and value.dim() == 0:
            dims.append(None)  # a counter such as cumulative_length: the same for every row
        else:
            dims.append(_UNKNOWN_DIM)
    return dims


_UNKNOWN_DIM = -999  # a tensor whose rows no rule knows: splitting it is a RowError
_CONTAINERS = ("dict", "list", "tuple")  # nodes that pass a row dim named for them on to their values


def _layer_rebuild(layer: Any, kids: list[Any]) -> Any:
    new = _with_attrs(layer, _layer_tensors(layer), kids)
    keys = getattr(new, "keys", None)
    if isinstance(keys, torch.Tensor) and keys.dim() and hasattr(new, "batch_size"):
        new.batch_size = int(keys.shape[0])  # StaticLayer keeps its own count
    return new


def _cache_rebuild(cache: Any, kids: list[Any]) -> Any:
    new = copy.copy(cache)
    new.layers = list(kids)
    return new


_ENC_DEC = ("self_attention_cache", "cross_attention_cache")


def _builtin_rules() -> list[tuple[Callable[[Any], bool], Node]]:
    return [
        (
            is_namedtuple,
            Node("NamedTuple", lambda t: [(f".{n}", getattr(t, n)) for n in type(t)._fields], lambda t, k: type(t)(*k)),
        ),
        (
            lambda o: _has_base(o, "transformers", "ModelOutput"),
            Node("ModelOutput", lambda o: [(_key_piece(k), v) for k, v in o.items()], _model_output_rebuild),
        ),
        (
            lambda o: _has_base(o, "transformers", "EncoderDecoderCache"),
            Node(
                "EncoderDecoderCache",
                lambda c: [(f".{n}", getattr(c, n)) for n in _ENC_DEC],
                lambda c, k: _with_attrs(c, list(_ENC_DEC), k),
                keeps_batch=True,
            ),
        ),
        (
            lambda o: _has_base(o, "transformers", "Cache") and isinstance(getattr(o, "layers", None), list),
            Node(
                "Cache",
                lambda c: [(f"[{i}]", layer) for i, layer in enumerate(c.layers)],
                _cache_rebuild,
                keeps_batch=True,
            ),
        ),
        (
            lambda o: (
                _has_base(o, "transformers", "CacheLayerMixin")
                or _has_base(o, "transformers", "LinearAttentionCacheLayerMixin")
            ),
            Node(
                "CacheLayer",
                lambda layer: [(f".{n}", getattr(layer, n)) for n in _layer_tensors(layer)],
                _layer_rebuild,
                _layer_row_dims,
                keeps_batch=True,
            ),
        ),
        (
            lambda o: dataclasses.is_dataclass(o) and not isinstance(o, type),
            Node("dataclass", _dataclass_children, _dataclass_rebuild),
        ),
        (
            lambda o: isinstance(o, dict),
            Node("dict", lambda d: [(_key_piece(k), d[k]) for k in sorted(d, key=_key_order)], _dict_rebuild),
        ),
        (
            lambda o: isinstance(o, list),
            Node("list", lambda s: [(f"[{i}]", v) for i, v in enumerate(s)], lambda s, k: list(k)),
        ),
        (
            lambda o: isinstance(o, tuple),
            Node("tuple", lambda s: [(f"[{i}]", v) for i, v in enumerate(s)], lambda s, k: tuple(k)),
        ),
    ]


_RULES.extend(_builtin_rules())


def _pytree_node(obj: object) -> Node | None:
    try:
        from torch.utils import _pytree as pytree
    except ImportError:  # private API: feature-detected
        return None
    entry = pytree.SUPPORTED_NODES.get(type(obj))
    if entry is None:
        return None

    def children(o: Any) -> list[tuple[str, Any]]:
        with_keys = getattr(entry, "flatten_with_keys_fn", None)
        if with_keys is not None:
            pairs, _ = with_keys(o)
            return [(str(key), child) for key, child in pairs]
        kids, _ = entry.flatten_fn(o)
        return [(f"[{i}]", child) for i, child in enumerate(kids)]

    def rebuild(o: Any, kids: list[Any]) -> Any:
        return entry.unflatten_fn(kids, entry.flatten_fn(o)[1])

    return Node(f"pytree:{type(obj).__qualname__}", children, rebuild)


def is_leaf(obj: object) -> bool:
    """Tensors, NumPy arrays, ``None``, numbers, strings and bytes."""
    return isinstance(obj, (torch.Tensor, *SCALARS)) or _is_numpy(obj)


def _is_numpy(obj: object) -> bool:
    return type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray"


def node_of(obj: object, path: str = "") -> Node:
    """The rule that walks ``obj`` (not a leaf); :class:`UnknownNode` when there is none."""
    for match, rule in (*_USER_RULES, *_RULES):
        if match(obj):
            return rule
    node = _pytree_node(obj)
    if node is not None:
        return node
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    raise UnknownNode(
        f"cannot walk a {kind} at '{path or '<root>'}': samebits knows tensors, numbers, strings, None, tuples, lists, dicts, "
        f"NamedTuples, dataclasses and transformers' ModelOutput and Cache classes; register it with samebits.register_node({type(obj).__name__}, ...)"
    )


# -- paths and maps ----------------------------------------------------------------------------
def flatten(obj: object, prefix: str = "") -> dict[str, Any]:
    """``{path: leaf}`` in walk order: ``[i]`` for sequence items, ``.name`` for fields and
    identifier keys, ``['key']`` for other keys (dict keys sorted). A bare leaf gets the path
    ``prefix`` (``""``). NumPy arrays become tensors."""
    out: dict[str, Any] = {}

    def walk(o: object, path: str) -> None:
        if is_leaf(o):
            out[path] = torch.from_numpy(o) if _is_numpy(o) else o
            return
        for piece, child in node_of(o, path).children(o):
            walk(child, path + piece)

    walk(obj, prefix)
    return out


def tensors(obj: object) -> list[torch.Tensor]:
    """Every tensor leaf of ``obj``, in walk order."""
    return [leaf for leaf in flatten(obj).values() if isinstance(leaf, torch.Tensor)]


def map_tensors(fn: Callable[[torch.Tensor], Any], obj: object) -> Any:
    """``obj`` rebuilt with ``fn`` applied to each tensor leaf (other leaves kept; types kept)."""

    def walk(o: object, path: str) -> Any:
        if isinstance(o, torch.Tensor):
            return fn(o)
        if is_leaf(o):
            return o
        node = node_of(o, path)
        return node.rebuild(o, [walk(child, path + piece) for piece, child in node.children(o)])

    return walk(obj, "")


def move(obj: object, device: str | torch.device, dtype: torch.dtype | None = None) -> Any:
    """Every tensor moved to ``device`` (floating ones cast to ``dtype`` where given)."""

    def one(t: torch.Tensor) -> torch.Tensor:
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        return t.to(device)

    return map_tensors(one, obj)


# -- rows --------------------------------------------------------------------------------------
class _RowOps:
    """What one row operation does at a row tensor, a row list and a shared leaf."""

    def tensor(self, parts: list[torch.Tensor], dim: int, whole: bool, path: str) -> Any:
        raise NotImplementedError

    def rows(self, parts: list[list[Any]], path: str) -> Any:
        raise NotImplementedError

    def shared(self, parts: list[Any], path: str) -> Any:
        return parts[0]


def _row_walk(
    objs: list[Any],
    ns: list[int],
    ops: _RowOps,
    *,
    dim: int,
    strict: bool,
    path: str = "",
    row_dim: Any = _AS_GIVEN,
    whole: bool = False,
) -> Any:
    head = objs[0]
    if isinstance(head, torch.Tensor):
        explicit = row_dim is not _AS_GIVEN
        if not explicit:
            row_dim = (
                dim
                if all(isinstance(o, torch.Tensor) and o.dim() > dim and o.shape[dim] == n for o, n in zip(objs, ns))
                else None
            )
        elif row_dim == _UNKNOWN_DIM:
            raise RowError(
                f"no rule says which dim of '{path}' holds the rows (shape {tuple(head.shape)}); register its type with samebits.register_node(..., row_dims=...)"
            )
        elif row_dim is not None and any(o.dim() <= row_dim or o.shape[row_dim] != n for o, n in zip(objs, ns)):
            raise RowError(
                f"'{path}' should hold the rows in dim {row_dim}, but its shape {tuple(head.shape)} has no dim of the batch's {ns[0]}"
            )
        if row_dim is not None:
            return ops.tensor(objs, row_dim, whole, path)
        if strict and not explicit:
            raise RowError(_unsplittable(path, head, dim, ns[0]))
        return ops.shared(objs, path)
    if is_leaf(head):
        return ops.shared(objs, path)
    if (
        isinstance(head, list)
        and row_dim is _AS_GIVEN
        and all(isinstance(o, list) and len(o) == n for o, n in zip(objs, ns))
    ):
        return ops.rows(objs, path)
    node = node_of(head, path)
    kids = [node.children(o) for o in objs]
    pieces = [p for p, _ in kids[0]]
    for other in kids[1:]:
        if [p for p, _ in other] != pieces:
            raise RowError(
                f"the parts at '{path or '<root>'}' differ in structure ({', '.join(pieces)} vs {', '.join(p for p, _ in other)})"
            )
    dims: list[Any]
    if node.row_dims:
        dims = node.row_dims(head)
    else:  # a plain container inside a node that named its rows' dim: each of its values has it
        inherit = row_dim if row_dim is not _AS_GIVEN and node.name in _CONTAINERS else _AS_GIVEN
        dims = [inherit] * len(pieces)
    new = [
        _row_walk(
            [k[j][1] for k in kids],
            ns,
            ops,
            dim=dim,
            strict=strict,
            path=path + pieces[j],
            row_dim=dims[j],
            whole=whole or node.keeps_batch,
        )
        for j in range(len(pieces))
    ]
    return node.rebuild(head, new)


def _unsplittable(path: str, leaf: torch.Tensor, dim: int, n: int) -> str:
    """Why an output leaf has no rows of a batch of ``n`` along ``dim``, and what would help."""
    where = f"the output at '{path or '<output>'}' has shape {tuple(leaf.shape)}"
    if leaf.dim() == 0:
        return (
            f"{where}: one value for the whole batch (a loss or a count), with no row per sample; "
            "return it apart from the per-sample outputs, or leave it out for inference"
        )
    other = [d for d, size in enumerate(leaf.shape) if size == n and d != dim]
    if other:
        return (
            f"{where}: its batch of {n} is along dim {other[0]}, not dim {dim} as the inputs' is; "
            f"return it with the batch first (e.g. .transpose(0, {other[0]})), since every input and output is cut along one dim"
        )
    return f"{where}, with no batch dim {dim} of size {n}: its rows cannot be split"


class _Take(_RowOps):
    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop = start, stop

    def tensor(self, parts: list[torch.Tensor], dim: int, whole: bool, path: str) -> Any:
        return parts[0].narrow(dim, self.start, self.stop - self.start)

    def rows(self, parts: list[list[Any]], path: str) -> Any:
        return list(parts[0][self.start : self.stop])


class _Row(_RowOps):
    def __init__(self, index: int) -> None:
        self.index = index

    def tensor(self, parts: list[torch.Tensor], dim: int, whole: bool, path: str) -> Any:
        t = parts[0]
        return t.narrow(dim, self.index, 1) if whole else t.select(dim, self.index)

    def rows(self, parts: list[list[Any]], path: str) -> Any:
        return parts[0][self.index]


class _Join(_RowOps):
    def __init__(self, strict: bool) -> None:
        self.strict = strict

    def tensor(self, parts: list[torch.Tensor], dim: int, whole: bool, path: str) -> Any:
        return torch.cat(parts, dim)

    def rows(self, parts: list[list[Any]], path: str) -> Any:
        return [item for part in parts for item in part]

    def shared(self, parts: list[Any], path: str) -> Any:
        head = parts[0]
        if self.strict:
            same = all(torch.equal(head, p) if isinstance(head, torch.Tensor) else p == head for p in parts[1:])
            if not same:
                raise RowError(
                    f"the value at '{path or '<output>'}' is not a row and differs between batches ({head!r} vs others): it cannot be joined"
                )
        return head


def batch_size(obj: object, dim: int = 0) -> int | None:
    """The batch size of ``obj`` read from its first row-holder in walk order: the size along
    ``dim`` of the first tensor with that dim, or the length of the first list whose items are
    not themselves lists. ``None`` where there is neither."""

    def walk(o: object, path: str) -> int | None:
        if isinstance(o, torch.Tensor):
            return int(o.shape[dim]) if o.dim() > dim else None
        if is_leaf(o):
            return None
        if isinstance(o, list) and o and not any(isinstance(item, list) for item in o):
            return len(o)
        for piece, child in node_of(o, path).children(o):
            found = walk(child, path + piece)
            if found is not None:
                return found
        return None

    return walk(obj, "")


def take(obj: object, start: int, stop: int, n: int, *, dim: int = 0, strict: bool = False) -> Any:
    """Rows ``start:stop`` of ``obj`` (a batch of ``n``), still batched; types kept. With
    ``strict``, a tensor without the batch dim is a :class:`RowError` (outputs); without, it is
    shared by every row and kept (inputs)."""
    if type(obj) is torch.Tensor and obj.dim() > dim and obj.shape[dim] == n:  # the common case, no walk
        return obj.narrow(dim, start, stop - start)
    return _row_walk([obj], [n], _Take(start, stop), dim=dim, strict=strict)


def row(obj: object, index: int, n: int, *, dim: int = 0, strict: bool = False) -> Any:
    """Row ``index`` of ``obj`` (a batch of ``n``) without its batch dim: a tensor row, a
    list's entry; caches keep a batch of 1."""
    return _row_walk([obj], [n], _Row(index), dim=dim, strict=strict)


def join(parts: Sequence[Any], sizes: Sequence[int], *, dim: int = 0, strict: bool = True) -> Any:
    """Batches of the same structure joined in order (part ``i`` holds ``sizes[i]`` rows): the
    inverse of :func:`take`. With ``strict``, a shared leaf that differs between parts is a
    :class:`RowError`; without, the first part's is kept."""
    if all(type(p) is torch.Tensor and p.dim() > dim and p.shape[dim] == n for p, n in zip(parts, sizes)):
        return torch.cat(list(parts), dim)  # the common case, no walk
    return _row_walk(list(parts), list(sizes), _Join(strict), dim=dim, strict=strict)


def map_rows(
    obj: object,
    n: int,
    tensor_fn: Callable[[torch.Tensor, int, str], torch.Tensor],
    entry_fn: Callable[[Any], Any],
    *,
    dim: int = 0,
) -> Any:
    """``obj`` (a batch of ``n``) with every row tensor replaced by ``tensor_fn(tensor, dim,
    path)`` and every entry of a row list by ``entry_fn(entry)``; shared leaves kept."""

    class _Map(_RowOps):
        def tensor(self, parts: list[torch.Tensor], d: int, whole: bool, path: str) -> Any:
            return tensor_fn(parts[0], d, path)

        def rows(self, parts: list[list[Any]], path: str) -> Any:
            return [entry_fn(entry) for entry in parts[0]]

    return _row_walk([obj], [n], _Map(), dim=dim, strict=False)


def stack(samples: Sequence[Any], template: Any, n: int, *, dim: int = 0) -> Any:
    """Samples without a batch dim (as :func:`row` returns them) stacked into one batch shaped
    like ``template`` (a batch of ``n``): row tensors stacked along ``dim``, row-list entries
    collected into a list; shared leaves taken from the template."""

    paths = [_paths_of(s) for s in samples]

    def parts_at(path: str) -> list[Any]:
        if not all(path in p for p in paths):
            raise RowError(f"a sample has no part at '{path or '<root>'}' where the model's inputs have one")
        return [p[path] for p in paths]

    class _Stack(_RowOps):
        def tensor(self, parts: list[torch.Tensor], d: int, whole: bool, path: str) -> Any:
            return (torch.cat if whole else torch.stack)(parts_at(path), d)

        def rows(self, parts: list[list[Any]], path: str) -> Any:
            return parts_at(path)

    return _row_walk([template], [n], _Stack(), dim=dim, strict=False)


def _paths_of(sample: object) -> dict[str, Any]:
    """Every node and leaf of ``sample`` by path (the root is ``""``)."""
    out: dict[str, Any] = {}

    def walk(o: object, path: str) -> None:
        out[path] = o
        if is_leaf(o):
            return
        for piece, child in node_of(o, path).children(o):
            walk(child, path + piece)

    walk(sample, "")
    return out


# -- skeletons (goldens) -----------------------------------------------------------------------
def skeleton(obj: object, store: Callable[[torch.Tensor, str], str], name: str = "") -> Any:
    """A JSON tree of ``obj``: each tensor passed to ``store(tensor, path)``, which returns the
    name it is stored under (``{"$tensor": name}``); tuples are ``{"$tuple": [...]}``, dicts with
    string keys ``{"$dict": {...}}``, other nodes ``{"$node": rule, "type": "module.Class",
    "children": [[piece, subtree], ...]}`` (version :data:`SKELETON_VERSION`)."""
    if isinstance(obj, torch.Tensor):
        return {"$tensor": store(obj, name)}
    if _is_numpy(obj):
        return {"$tensor": store(torch.from_numpy(obj), name)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if is_leaf(obj):
        raise TreeError(f"a {type(obj).__name__} at '{name or '<root>'}' cannot be stored in JSON")
    node = node_of(obj, name)
    if type(obj) is tuple:
        return {"$tuple": [skeleton(v, store, f"{name}[{i}]") for i, v in enumerate(obj)]}
    if type(obj) is list:
        return [skeleton(v, store, f"{name}[{i}]") for i, v in enumerate(obj)]
    if type(obj) is dict and all(isinstance(k, str) for k in obj):
        return {"$dict": {k: skeleton(v, store, f"{name}{_key_piece(k)}") for k, v in obj.items()}}
    kind = f"{type(obj).__module__}:{type(obj).__qualname__}"
    return {
        "$node": node.name,
        "type": kind,
        "children": [[piece, skeleton(child, store, name + piece)] for piece, child in node.children(obj)],
    }


def unskeleton(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The object a :func:`skeleton` describes. A ``$node`` is rebuilt only as a NamedTuple, a
    transformers ``ModelOutput`` or a dataclass without ``__post_init__`` whose class is already
    imported (found in ``sys.modules``, never imported from a name in a file); other nodes are a
    :class:`TreeError`."""
    if isinstance(tree, list):
        return [unskeleton(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "$tensor" in tree:
        if tree["$tensor"] not in tensors:
            raise TreeError(f"the stored tensor '{tree['$tensor']}' is missing")
        return tensors[tree["$tensor"]]
    if "$tuple" in tree:
        return tuple(unskeleton(v, tensors) for v in _list_of(tree["$tuple"]))
    if "$dict" in tree and isinstance(tree["$dict"], dict):
        return {k: unskeleton(v, tensors) for k, v in tree["$dict"].items()}
    if "$node" in tree:
        return _rebuild_node(tree, tensors)
    raise TreeError(f"unknown node in a stored structure: {sorted(tree)[:4]}")


def _list_of(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TreeError(f"a stored sequence is a {type(value).__name__}, not a list")
    return value


def _rebuild_node(tree: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Any:
    kind, rule = str(tree.get("type", "")), tree.get("$node")
    module_name, _, qualname = kind.partition(":")
    cls: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if cls is not None and qualname else ():
        cls = getattr(cls, part, None)
    if not isinstance(cls, type):
        raise TreeError(
            f"a stored {rule} of type {kind or '?'} cannot be rebuilt: its class is not loaded (load the model first)"
        )
    pairs = _list_of(tree.get("children"))
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
        raise TreeError(f"the stored children of a {rule} are malformed")
    kids = {piece.lstrip("."): unskeleton(sub, tensors) for piece, sub in pairs}
    if rule == "NamedTuple" and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return cls(**kids)
    if rule == "ModelOutput" and any(
        c.__name__ == "ModelOutput" and c.__module__.startswith("transformers") for c in cls.__mro__
    ):
        return cls(**kids)
    if rule == "dataclass" and dataclasses.is_dataclass(cls) and not hasattr(cls, "__post_init__"):
        return cls(**kids)
    raise TreeError(f"a stored {rule} ({kind}) cannot be rebuilt from a file; pass the inputs again (--input)")
