"""Op-level digests inside one module call, through a TorchDispatchMode: which aten op inside
the module found first gives other bits."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from samebits.models.inputs import Model, ModelInputs
from samebits.measure.trace import DigestCache, same


# Ops whose output is uninitialised memory: its bytes are noise, never a difference. An op that
# then writes into that buffer in place (``bernoulli_`` in Dropout) is recorded after the write.
UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"})
# Ops that move, view or copy values without arithmetic: their output differs only where their
# input did (or where rows of a flattened view are cut as a batch's), so no first op is one.
NO_ARITHMETIC = frozenset(
    {
        *("view", "reshape", "_unsafe_view", "t", "transpose", "permute", "expand", "expand_as", "as_strided"),
        *("slice", "select", "narrow", "unsqueeze", "squeeze", "flatten", "unflatten", "unfold", "view_as"),
        *("clone", "copy_", "contiguous", "detach", "alias", "lift_fresh", "_to_copy", "to", "_reshape_alias"),
        *("cat", "stack", "split", "split_with_sizes", "chunk", "unbind", "index_select", "gather", "embedding"),
        *("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "new_zeros", "new_ones"),
        *("fill_", "pad", "constant_pad_nd", "repeat", "roll", "flip"),
    }
)


# Ops that sort, select or count rows without rounding a value: where a batch's rows are routed
# (a mixture's tokens sorted by expert), their outputs differ with the neighbours, but the bits
# that change are computed later. Never named first for a kernel's difference; they are where
# a row first takes other rows' values (``coupling``).
ROUTING = frozenset(
    {
        *("sort", "argsort", "topk", "kthvalue", "nonzero", "where", "index", "masked_select", "take"),
        *("one_hot", "histc", "bincount", "unique", "_unique2", "searchsorted", "scatter", "index_put", "index_put_"),
        *("_pack_padded_sequence", "_pad_packed_sequence", "max", "min", "argmax", "argmin"),
    }
)


@dataclasses.dataclass(frozen=True)
class OpCall:
    """One aten op run inside a module call: its name, digests of its tensor inputs and of its
    output (and their blocks, ``measure.trace.blocks_of``, with rows), and whether the output is
    floating point (integer and boolean outputs are indices and masks: nothing is rounded)."""

    name: str
    inputs: str
    outputs: str
    block_inputs: str = ""
    block_outputs: str = ""
    floating: bool = True

    def same_outputs(self, other: OpCall) -> bool:
        return same(self.outputs, other.outputs, self.block_outputs, other.block_outputs)

    def same_inputs(self, other: OpCall) -> bool:
        return same(self.inputs, other.inputs, self.block_inputs, other.block_inputs)


def _dispatch_mode_class() -> Any:
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:  # private API: feature-detected, the op-level look is optional
        return None
    return TorchDispatchMode


def _recorder(record: Callable[[str, Any, Any], None], before: Callable[[Any], Any] = lambda args: None) -> Any:
    """A dispatch mode class that calls ``record(name, before(inputs), output)`` after every aten
    op (``before`` sees its tensor inputs before the op runs: an in-place op changes them);
    ``None`` where torch has no dispatch modes."""
    base = _dispatch_mode_class()
    if base is None:
        return None
    from torch.utils._pytree import tree_leaves

    class Recorder(base):  # type: ignore[misc, valid-type]
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # No torch.compile runs in here: without this, the mode's first op imports
            # torch._dynamo (1.4 s on 2 cores) only to wrap this method in a dynamo-disable.
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen = before([a for a in tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)])
            out = func(*args, **(kwargs or {}))
            record(str(func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else func), seen, out)
            return out

    return Recorder


def op_names(model: Model, inputs: ModelInputs) -> list[str] | None:
    """The name of every aten op one forward runs, in order; ``None`` where ops cannot be seen."""
    names: list[str] = []
    recorder = _recorder(lambda name, seen, out: names.append(name))
    if recorder is None:
        return None
    with recorder(), torch.no_grad():
        inputs.call(model)
    return names


def op_digests(
    model: Model, inputs: ModelInputs, module: str, call: int = 0, rows: tuple[int, int] | None = None
) -> list[OpCall] | None:
    """Every aten op run inside call ``call`` of ``module`` (``""`` is the model), or ``None``
    where this cannot be seen (no dispatch modes, no module)."""
    modules = dict(model.named_modules()) if isinstance(model, nn.Module) else {}
    cache = DigestCache()
    ops: list[OpCall] = []

    def before(tensors: list[torch.Tensor]) -> tuple[str, str]:
        return cache.tree(tensors, rows), cache.blocks(tensors, rows)

    def record(name: str, seen: tuple[str, str], out: Any) -> None:
        if name not in UNINITIALISED:
            leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            floating = any(t.is_floating_point() or t.is_complex() for t in leaves)
            ops.append(OpCall(name, *seen[:1], cache.tree(out, rows), seen[1], cache.blocks(out, rows), floating))

    from torch.utils._pytree import tree_leaves

    Recorder = _recorder(record, before)
    if Recorder is None or module not in modules:
        return None

    state: dict[str, Any] = {"count": 0, "mode": None}

    def pre(mod: nn.Module, args: Any) -> None:
        if state["count"] == call and state["mode"] is None:
            mode = Recorder()
            mode.__enter__()
            state["mode"] = mode

    def post(mod: nn.Module, args: Any, output: object) -> None:
        if state["count"] == call and state["mode"] is not None:
            state["mode"].__exit__(None, None, None)
        state["count"] += 1

    with _hooks(modules[module], pre, post), torch.no_grad():
        inputs.call(model)
    return ops


@contextlib.contextmanager
def _hooks(module: nn.Module, pre: Any, post: Any) -> Iterator[None]:
    handles = [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def first_op_difference(a: list[OpCall] | None, b: list[OpCall] | None, coupling: bool = False) -> str | None:
    """``"aten.addmm (op 2 of 5 in the module)"``: the first op that computes other bits from
    the same inputs (or, where every differing op had differing inputs, the first that differs),
    passing over ops without arithmetic, routing ops and integer outputs; ``None`` where none
    differs. With ``coupling``, the first op of any kind whose row differs from the same row of
    inputs: where a row first takes its neighbours' values (two batches of one size, other
    neighbours)."""
    if not a or not b:
        return None
    parted = next((i for i, (x, y) in enumerate(zip(a, b)) if x.name != y.name), None)
    pairs = list(zip(a, b))[:parted]  # up to where the two runs' ops part
    differing = [(i, x) for i, (x, y) in enumerate(pairs) if not x.same_outputs(y)]
    if not coupling:
        differing = [(i, x) for i, x in differing if x.floating and x.name not in NO_ARITHMETIC | ROUTING]
    from_same = [(i, x) for i, x in differing if x.same_inputs(b[i])]
    chosen = (from_same or ([] if coupling else differing))[:1]
    if chosen:
        return f"aten.{chosen[0][1].name} (op {chosen[0][0] + 1} of {len(a)} in the module)"
    if parted is not None:
        return f"the ops differ from op {parted + 1} on ({a[parted].name} vs {b[parted].name})"
    return None


def op_calls(data: list[Any] | None) -> list[OpCall] | None:
    """Op records as a child process's JSON holds them."""
    return [OpCall(**o) for o in data] if data is not None else None
