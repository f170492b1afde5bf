"""Traces: output digests plus per-module input/output digests in call order, and where two
traces first diverge."""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard

import torch
from torch import nn

from samebits.models.inputs import Model, ModelInputs
from samebits.tensors.digest import RUN_DIGEST, Algorithm, digest_tree, hasher, leaf_digest
from samebits.tensors import tree
from samebits.tensors.tree import flatten


@dataclasses.dataclass
class ModuleCall:
    """One call of one module: where it is, what it is, and the digests of what went in and out."""

    name: str  # dotted path in named_modules(); "" is the model itself
    type: str
    call: int  # 0 for the first call of this module in the forward, 1 for the second, ...
    inputs: str  # one digest over all inputs
    outputs: str  # one digest over all outputs
    # With rows (n, i): the same under the block rule (see ``blocks_of``), each as "shape|digest";
    # "" where the forward ran without rows.
    block_inputs: str = ""
    block_outputs: str = ""

    @property
    def key(self) -> str:
        return f"{self.name or '<model>'}#{self.call}"

    @property
    def label(self) -> str:
        base = self.name or "<model>"
        return base if self.call == 0 else f"{base} (call {self.call + 1})"


@dataclasses.dataclass
class Trace:
    """Digests of one forward: each output path, and each module call in completion order (none
    for a forward run without hooks), all of one digest ``algorithm``."""

    outputs: dict[str, str]
    modules: list[ModuleCall]
    algorithm: Algorithm = RUN_DIGEST

    def to_dict(self) -> dict[str, Any]:
        modules = [dataclasses.asdict(m) for m in self.modules]
        return {"outputs": self.outputs, "modules": modules, "algorithm": self.algorithm}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        modules = [ModuleCall(**m) for m in data["modules"]]
        return cls(dict(data["outputs"]), modules, data.get("algorithm", "sha256"))


# Which part of an output to digest: everything (None), row i of tensors whose leading dim is n
# ((n, i)), or a custom selection applied to the whole output.
Rows = tuple[int, int] | Callable[[Any], Any] | None


def rows_of(obj: object, rows: Rows) -> Any:
    """With ``rows=(n, i)``: every tensor whose leading dim is ``n`` replaced by its row ``i``
    (kept 1-long); a callable ``rows`` is applied to ``obj`` as it is (a custom selection)."""
    if rows is None:
        return obj
    if callable(rows):
        return rows(obj)
    n, i = rows
    return tree.take(obj, i, i + 1, n)


def blocks_of(obj: object, n: int, i: int) -> dict[str, tuple[str, Any]]:
    """``{path: (block, leaf)}``: every tensor whose leading dim is a multiple ``k·n`` of ``n``
    cut to its ``i``-th block of ``k`` rows (``block`` is ``k``), as a batch-first tensor
    flattened to tokens (``[n·T, H]``, a mixture of experts' input) holds row ``i``'s tokens;
    other leaves whole (``block`` ``*`` and their leading dim). Two runs' blocks compare only
    where every block size agrees: the leaf then scales with the batch as rows do."""
    out: dict[str, tuple[str, Any]] = {}
    for path, leaf in flatten(obj).items():
        d = leaf.shape[0] if isinstance(leaf, torch.Tensor) and leaf.dim() > 0 else None
        if d and d % n == 0:
            k = d // n
            out[path] = (str(k), leaf.narrow(0, i * k, k) if n > 1 else leaf)
        else:
            out[path] = (f"*{d}", leaf)
    return out


def _is_one_tensor_call(obj: object) -> TypeGuard[tuple[tuple[torch.Tensor], dict[str, Any]]]:
    return (
        isinstance(obj, tuple)
        and len(obj) == 2
        and isinstance(obj[0], tuple)
        and len(obj[0]) == 1
        and isinstance(obj[0][0], torch.Tensor)
        and obj[1] == {}
    )


class DigestCache:
    """Digests of the tensors seen in one forward, so that a module's input that is an earlier
    module's output (unchanged since: same ``_version``) is not hashed twice."""

    def __init__(self, algorithm: Algorithm = RUN_DIGEST) -> None:
        self.algorithm = algorithm
        self._seen: dict[int, tuple[weakref.ref[torch.Tensor], int, str]] = {}

    def digest(self, leaf: Any) -> str:
        if not isinstance(leaf, torch.Tensor) or leaf.is_inference():  # inference tensors keep no version
            return leaf_digest(leaf, self.algorithm)
        hit = self._seen.get(id(leaf))
        if hit is not None and hit[0]() is leaf and hit[1] == leaf._version:
            return hit[2]
        value = leaf_digest(leaf, self.algorithm)
        self._seen[id(leaf)] = (weakref.ref(leaf), leaf._version, value)
        return value

    def tree(self, obj: object, rows: Rows) -> str:
        """One digest over every leaf of ``obj`` (its rows only, with ``rows``)."""
        if rows is None and isinstance(obj, torch.Tensor):
            return self.digest(obj)
        if rows is None and _is_one_tensor_call(obj):  # (args, kwargs) == ((tensor,), {})
            return "1:" + self.digest(obj[0][0])
        try:
            leaves = flatten(rows_of(obj, rows))
        except tree.TreeError:  # a module's input or output the tree does not know: no digest
            return "unhashable"
        h = hasher(self.algorithm)
        for path, leaf in leaves.items():
            h.update(f"{path}={self.digest(leaf)};".encode())
        return h.hexdigest()

    def blocks(self, obj: object, rows: Rows) -> str:
        """``"shape|digest"`` of ``obj`` under the block rule (``blocks_of``); ``""`` without
        ``(n, i)`` rows or where the tree does not know ``obj``."""
        if not isinstance(rows, tuple):
            return ""
        try:
            parts = blocks_of(obj, *rows)
        except tree.TreeError:
            return ""
        h = hasher(self.algorithm)
        for path, (_, leaf) in parts.items():
            h.update(f"{path}={self.digest(leaf) if rows[0] == 1 else leaf_digest(leaf, self.algorithm)};".encode())
        return ",".join(block for block, _ in parts.values()) + "|" + h.hexdigest()


KEEP_BUDGET_BYTES = 256 * 2**20


@contextlib.contextmanager
def module_hooks(
    model: Model,
    rows: Rows = None,
    keep: set[str] | None = None,
    algorithm: Algorithm = RUN_DIGEST,
) -> Iterator[tuple[list[ModuleCall], dict[str, Any]]]:
    """Record every module call of ``model`` while the block runs.

    Yields ``(calls, kept)``: the calls in completion order (children before their parent) and,
    for the call keys in ``keep``, the output tensors themselves (on CPU). Models hooks cannot see
    into (not an ``nn.Module``) record nothing.
    """
    calls: list[ModuleCall] = []
    kept: dict[str, Any] = {}
    kept_bytes = [0]  # past KEEP_BUDGET_BYTES, later calls are not kept (both runs keep the same ones)
    handles = []
    if isinstance(model, nn.Module) and not isinstance(model, torch.jit.ScriptModule):
        cache = DigestCache(algorithm)
        counts: dict[str, int] = {}
        pending: dict[int, list[tuple[str, str]]] = {}

        def pre(name: str):
            def hook(module: nn.Module, args: Any, kwargs: Any) -> None:
                digests = (cache.tree((args, kwargs), rows), cache.blocks((args, kwargs), rows))
                pending.setdefault(id(module), []).append(digests)

            return hook

        def post(name: str):
            def hook(module: nn.Module, args: Any, kwargs: Any, output: object) -> None:
                call = counts.get(name, 0)
                counts[name] = call + 1
                inputs, block_inputs = pending[id(module)].pop() if pending.get(id(module)) else ("", "")
                record = ModuleCall(name, type(module).__name__, call, inputs, cache.tree(output, rows), block_inputs)
                record.block_outputs = cache.blocks(output, rows)
                calls.append(record)
                if keep is not None and record.key in keep and kept_bytes[0] < KEEP_BUDGET_BYTES:
                    kept[record.key] = _kept(output, rows)
                    kept_bytes[0] += sum(
                        t.numel() * t.element_size() for t in kept[record.key].values() if isinstance(t, torch.Tensor)
                    )

            return hook

        for name, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(pre(name), with_kwargs=True))
            handles.append(module.register_forward_hook(post(name), with_kwargs=True))
    try:
        yield calls, kept
    finally:
        for handle in handles:
            handle.remove()


def _detach(obj: object) -> Any:
    return flatten(tree.map_tensors(lambda t: t.detach().cpu().clone(), obj))


def _kept(output: object, rows: Rows) -> dict[str, Any]:
    """A call's output as kept for comparison: its rows' blocks with ``(n, i)`` rows (a leaf that
    is not a block stays whole), else as ``rows_of`` selects."""
    if isinstance(rows, tuple):
        try:
            return {
                p: leaf.detach().cpu().clone() if isinstance(leaf, torch.Tensor) else leaf
                for p, (_, leaf) in blocks_of(output, *rows).items()
            }
        except tree.TreeError:
            pass
    return _detach(rows_of(output, rows))


def same(a: str, b: str, block_a: str, block_b: str) -> bool:
    """Whether two digests of one call agree: by their blocks where both runs' block sizes match
    (the leaves scale with the batch as rows do), else by the rows digests."""
    if block_a and block_b:
        shape_a, _, digest_a = block_a.partition("|")
        shape_b, _, digest_b = block_b.partition("|")
        if shape_a == shape_b:
            return digest_a == digest_b
    return a == b


def traced_forward(
    model: Model,
    inputs: ModelInputs,
    rows: Rows = None,
    keep: set[str] | None = None,
    algorithm: Algorithm = RUN_DIGEST,
) -> tuple[Any, Trace, dict[str, Any]]:
    """Run one forward under ``torch.no_grad()`` with hooks; return (output, trace, kept tensors)."""
    with module_hooks(model, rows, keep, algorithm) as (calls, kept), torch.no_grad():
        output = inputs.call(model)
    return output, Trace(digest_tree(rows_of(output, rows), algorithm), list(calls), algorithm), dict(kept)


def plain_forward(model: Model, inputs: ModelInputs) -> Any:
    with torch.no_grad():
        return inputs.call(model)


def digested_forward(model: Model, inputs: ModelInputs, algorithm: Algorithm = RUN_DIGEST) -> tuple[Any, Trace]:
    """One forward without hooks: the output and a trace of its output digests only."""
    output = plain_forward(model, inputs)
    return output, Trace(digest_tree(output, algorithm), [], algorithm)


@dataclasses.dataclass
class Divergence:
    """Where two traces first differ: the module call whose output changed while its inputs did not."""

    call: ModuleCall
    inputs_identical: bool
    index: int  # position in the first trace's call list
    later: list[ModuleCall]  # the calls after it whose outputs also differ, in order
    calls: list[tuple[ModuleCall, bool]] = dataclasses.field(default_factory=list)  # every call, and whether it differs


def first_divergence(a: Trace, b: Trace) -> Divergence | None:
    """The first module call (in completion order) whose output digests differ between ``a`` and ``b``.

    When that call's inputs differed too, the difference began in code between modules (in the
    parent's own forward); the parent is then the first call with identical inputs that differs,
    found further up. Traces taken with rows compare a call by its blocks where they scale with
    the batch (``blocks_of``): a module fed a batch flattened to tokens (the experts of a mixture)
    is found in place of its parent. ``None`` when no module output differs (or there are no
    module calls).
    """
    if a.algorithm != b.algorithm:
        raise ValueError(f"cannot compare a {a.algorithm} trace with a {b.algorithm} one")
    other = {m.key: m for m in b.modules}

    def outputs_same(m: ModuleCall) -> bool:
        o = other[m.key]
        return same(m.outputs, o.outputs, m.block_outputs, o.block_outputs)

    def inputs_same(m: ModuleCall) -> bool:
        o = other[m.key]
        return same(m.inputs, o.inputs, m.block_inputs, o.block_inputs)

    differing = [(i, m) for i, m in enumerate(a.modules) if m.key in other and not outputs_same(m)]
    if not differing:
        return None
    origin = next(((i, m) for i, m in differing if inputs_same(m)), differing[0])
    i, call = origin
    later = [m for j, m in differing if j > i]
    differs = {j for j, _ in differing}
    calls = [(m, j in differs) for j, m in enumerate(a.modules)]
    return Divergence(call, inputs_same(call), i, later, calls)
