"""Op-level digests inside one module call, through a TorchDispatchMode: which aten op inside
the module found first gives other bits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from samebits.models.inputs import ModelInputs
from samebits.measure.trace import DigestCache


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


def _dispatch_mode_class() -> Any:
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:  # private API: feature-detected, the op-level look is optional
        return None
    return TorchDispatchMode


def _recorder(record: Any) -> Any:
    """A dispatch mode class that calls ``record(name, output)`` after every aten op; ``None``
    where torch has no dispatch modes."""
    base = _dispatch_mode_class()
    if base is None:
        return None

    class Recorder(base):  # type: ignore[misc, valid-type]
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # No torch.compile runs in here: without this, the mode's first op imports
            # torch._dynamo (1.4 s on 2 cores) only to wrap this method in a dynamo-disable.
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            record(str(func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else func), out)
            return out

    return Recorder


def op_names(model: Any, inputs: ModelInputs) -> list[str] | None:
    """The name of every aten op one forward runs, in order; ``None`` where ops cannot be seen."""
    names: list[str] = []
    recorder = _recorder(lambda name, out: names.append(name))
    if recorder is None:
        return None
    with recorder(), torch.no_grad():
        inputs.call(model)
    return names


def op_digests(
    model: Any, inputs: ModelInputs, module: str, call: int = 0, rows: tuple[int, int] | None = None
) -> list[tuple[str, str]] | None:
    """``[(op name, output digest)]`` for every aten op run inside call ``call`` of ``module``
    (``""`` is the model), or ``None`` where this cannot be seen (no dispatch modes, no module)."""
    modules = dict(model.named_modules()) if isinstance(model, nn.Module) else {}
    cache = DigestCache()
    ops: list[tuple[str, str]] = []

    def record(name: str, out: Any) -> None:
        if name not in UNINITIALISED:
            ops.append((name, cache.tree(out, rows)))

    Recorder = _recorder(record)
    if Recorder is None or module not in modules:
        return None

    state: dict[str, Any] = {"count": 0, "mode": None}

    def pre(mod: nn.Module, args: Any) -> None:
        if state["count"] == call and state["mode"] is None:
            mode = Recorder()
            mode.__enter__()
            state["mode"] = mode

    def post(mod: nn.Module, args: Any, output: Any) -> None:
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


def first_op_difference(a: list[tuple[str, str]] | None, b: list[tuple[str, str]] | None) -> str | None:
    """``"aten.addmm (op 2 of 5)"`` for the first op whose output differs, or ``None``."""
    if not a or not b:
        return None
    for i, ((name_a, dig_a), (name_b, dig_b)) in enumerate(zip(a, b)):
        if name_a != name_b:
            return f"the ops differ from op {i + 1} on ({name_a} vs {name_b})"
        if dig_a != dig_b and name_a not in NO_ARITHMETIC:
            return f"aten.{name_a} (op {i + 1} of {len(a)} in the module)"
    return None
