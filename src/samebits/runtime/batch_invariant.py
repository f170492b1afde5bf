"""Batch invariance by construction: inside ``samebits.batch_invariant()``, the ops whose kernels
pick another algorithm for another batch size (matmuls, linear layers, convolutions, attention)
run on fixed tiles of rows along dim 0, the last tile padded with zeros, each tile of one layout
and alignment; the tile is the largest at most ``tile`` at which this CPU's kernel gives a row the
same bits at every position (measured once per op and shape). A row's bits then do not depend
on the batch it is in, with no calibration; row-wise ops (norms, softmax, activations) need
nothing. Measured on the CPU by the check's batch axis (tests/test_batch_invariant.py). On CUDA,
where Triton is installed, matmuls, softmax, ``mean`` and attention run on fixed-order kernels
instead (``runtime/fixed_order.py``: one tile shape, no split-K, no padding); convolutions keep
the tiles. Not yet run on a GPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from samebits.errors import UserError
from samebits.runtime import fixed_order

aten = torch.ops.aten

# op -> the positions of its arguments whose dim 0 is the batch (the rest: weights, shared); ops
# this torch lacks are left out (fixed_order.overloads: the package declares torch >= 2.2)
ROW_ARGS: dict[Any, tuple[int, ...]] = fixed_order.overloads(
    {
        "linear.default": (0,),
        "mm.default": (0,),
        "addmm.default": (1,),
        "matmul.default": (0, 1),  # both where the second is batched too (attention), else the first
        "bmm.default": (0, 1),
        "baddbmm.default": (1, 2),
        "conv1d.default": (0,),
        "conv2d.default": (0,),
        "conv3d.default": (0,),
        "scaled_dot_product_attention.default": (0, 1, 2),
        # what the composite ops above become where autograd runs first (no_grad, not inference_mode)
        "convolution.default": (0,),
        "_scaled_dot_product_flash_attention_for_cpu.default": (0, 1, 2),
        # nn.TransformerEncoderLayer's and nn.MultiheadAttention's fused fast paths (eval, batch first)
        "_transformer_encoder_layer_fwd.default": (0,),
        "_native_multi_head_attention.default": (0, 1, 2),
    }
)
# fused attention's (mask, mask_type) positions: the mask is per row for mask types 1 (key
# padding, (B, S)) and 2 (merged, (B, H, L, S)); type 0 is one (L, S) mask for every row
TYPED_MASKS: dict[Any, tuple[int, int]] = fixed_order.overloads(
    {
        "_transformer_encoder_layer_fwd.default": (18, 19),
        "_native_multi_head_attention.default": (9, 12),
    }
)
# arguments that are per row only where their dim 0 is the batch's (else broadcast to every row)
PER_ROW_IF_BATCHED: dict[Any, tuple[int, ...]] = fixed_order.overloads(
    {
        "linear.default": (2,),
        "addmm.default": (0,),
        "baddbmm.default": (0,),
        "scaled_dot_product_attention.default": (3,),
    }
)
TILE = 32
# a linear over sequences (3 or more dims) takes tile x this many rows a call: as many as tiles
# of 32-position samples did along dim 0, without knowing which leading dim is the batch
SEQUENCE_ROWS = 32


class BatchInvariant(TorchDispatchMode):
    """The dispatch mode behind :func:`batch_invariant`."""

    def __init__(self, tile: int = TILE, kernels: bool | None = None) -> None:
        super().__init__()
        if not isinstance(tile, int) or isinstance(tile, bool) or tile < 1:
            raise ValueError(f"tile must be a positive int, not {tile!r}")
        if kernels is True and (reason := fixed_order.unavailable()):
            raise UserError(reason)
        self.tile = tile
        self.kernels = kernels

    def _on_kernels(self, func: OpOverload, args: tuple[Any, ...]) -> bool:
        """Whether ``func`` runs on the fixed-order kernels: always where asked, by default for
        CUDA tensors where Triton is installed."""
        if func not in fixed_order.CALLS or self.kernels is False:
            return False
        on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if self.kernels:
            if not on_cuda and os.environ.get("TRITON_INTERPRET") != "1":
                raise UserError(
                    "batch_invariant(kernels=True) on CPU tensors runs Triton's interpreter: "
                    "start Python with TRITON_INTERPRET=1 (read when triton is imported), or use kernels=None"
                )
            return True
        return on_cuda and fixed_order.unavailable() is None

    def __torch_dispatch__(self, func: OpOverload, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self._on_kernels(func, args):
            out = fixed_order.call(func, args, kwargs)
            if out is not NotImplemented:
                return out
        rows = ROW_ARGS.get(func)
        if func in (aten.linear.default, aten.matmul.default) and _times_a_weight(func, args, kwargs):
            # each output row is its input row's: every leading dim is rows, whichever is the
            # batch (attention's projections see (length, batch, features))
            x = args[0]
            per_call = self.tile if x.dim() == 2 else self.tile * SEQUENCE_ROWS
            flat = _tiled(func, (x.reshape(-1, x.shape[-1]), *args[1:]), kwargs, (0,), per_call)
            return flat.reshape(*x.shape[:-1], flat.shape[-1])
        if rows is None or not _batched(args, rows):
            return func(*args, **kwargs)
        return _tiled(func, args, kwargs, rows, self.tile)


def _times_a_weight(func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a linear or matmul call is rows (of 2 or more dims, some) times one weight matrix
    with at most one bias row for every row (a bias per position is cut with dim 0's tiles)."""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.is_nested or x.dim() < 2 or x.numel() == 0:
        return False
    if len(args) < 2 or not isinstance(args[1], torch.Tensor) or args[1].dim() != 2:
        return False
    bias = args[2] if func is aten.linear.default and len(args) > 2 else kwargs.get("bias")
    return not isinstance(bias, torch.Tensor) or bias.dim() <= 1


def _batched(args: tuple[Any, ...], rows: tuple[int, ...]) -> bool:
    """Whether the call has a batch to tile: its row arguments are tensors with one leading size
    (a matmul of a 1-D vector, or mismatched leading sizes, is left alone)."""
    tensors = [args[i] for i in rows if i < len(args)]
    if len(tensors) != len(rows) or not all(
        isinstance(t, torch.Tensor) and not t.is_nested and t.dim() >= 2 for t in tensors
    ):
        return False
    return len({t.shape[0] for t in tensors}) == 1


Where = int | str  # an argument's position, or the name of a keyword argument


def _per_row(
    func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], rows: tuple[int, ...]
) -> dict[Where, Any]:
    """The arguments cut with the batch: the row arguments, and a bias or mask given per row
    (its dim 0 the batch's and as many dims as the rows) rather than broadcast to every row."""
    batch, dims = args[rows[0]].shape[0], args[rows[0]].dim()
    per_row: dict[Where, Any] = {i: args[i] for i in rows}
    for i in PER_ROW_IF_BATCHED.get(func, ()):
        extra = args[i] if i < len(args) else None
        if isinstance(extra, torch.Tensor) and extra.dim() == dims and extra.shape[0] == batch:
            per_row[i] = extra
    if func in TYPED_MASKS:
        at, kind_at = TYPED_MASKS[func]
        mask = args[at] if at < len(args) else None
        if isinstance(mask, torch.Tensor) and kind_at < len(args) and args[kind_at] in (1, 2):
            per_row[at] = mask
    mask = kwargs.get("attn_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() == dims and mask.shape[0] == batch:
        per_row["attn_mask"] = mask
    return per_row


ALIGN = 64  # bytes: the widest vector loads (AVX-512); a fresh CPU tensor starts at such an address


def _fresh(t: torch.Tensor, rows: int, order: list[int]) -> torch.Tensor:
    """``t``'s rows as a tile of ``rows`` rows (zeros after them), its dims laid out outermost
    first in ``order``, dense and starting at an aligned address: every call gets one shape, one
    layout and one alignment (GEMMs give other bits for a transposed operand or an offset start
    on some CPUs). ``t`` itself where it is such a tile already (the full tiles of a contiguous
    batch); a fresh copy otherwise."""
    if t.shape[0] == rows and t.data_ptr() % ALIGN == 0 and _dense(t, order):
        return t
    shape = [rows if d == 0 else t.shape[d] for d in order]
    out = t.new_zeros(shape).permute([order.index(d) for d in range(t.dim())])
    out[: t.shape[0]] = t
    return out


def _dense(t: torch.Tensor, order: list[int]) -> bool:
    """Whether ``t`` is laid out densely, its dims outermost first in ``order``."""
    expected, step = [0] * t.dim(), 1
    for d in reversed(order):
        expected[d] = step
        step *= t.shape[d]
    return all(t.shape[d] == 1 or t.stride(d) == expected[d] for d in range(t.dim()))


def _order(t: torch.Tensor, rows_last: bool) -> list[int]:
    """``t``'s dims from the outermost stride in; ``rows_last``: dim 0 innermost instead."""
    strides = t.stride()
    order = sorted(range(t.dim()), key=lambda d: (-strides[d], d))
    return [*[d for d in order if d], 0] if rows_last else order


def _call(func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], cut: dict[Where, Any]) -> Any:
    call = tuple(cut.get(i, a) for i, a in enumerate(args))
    return func(*call, **{k: cut.get(k, v) for k, v in kwargs.items()})


def _outputs(out: Any) -> list[torch.Tensor]:
    parts = out if isinstance(out, tuple) else (out,)
    return [p for p in parts if isinstance(p, torch.Tensor) and p.dim()]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.is_floating_point() else t  # NaN's bits compare too


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any], per_row: dict[Where, Any]) -> tuple[Any, ...]:
    def sig(where: Where, a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            shape = tuple(a.shape[1:]) if where in per_row else tuple(a.shape)
            return (shape, a.dtype, a.device, tuple(_order(a, False)))
        return a if isinstance(a, (int, float, bool, str, type(None))) else repr(a)[:64]

    return (*(sig(i, a) for i, a in enumerate(args)), *((k, sig(k, v)) for k, v in sorted(kwargs.items())))


# (op, argument signature, tile asked, threads, dispatch modes below) -> the largest tile at which
# that op gives a row the same bits at every position, and whether its rows are laid out innermost:
# a fact of this process's kernels, measured once (:func:`_position_free_tile`)
_TILES: dict[tuple[Any, ...], tuple[int, bool]] = {}


def _modes_below() -> tuple[type, ...]:
    """The dispatch modes under this one (each can change what an op's kernel does)."""
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    except ImportError:  # private API: without it, no mode is told apart
        return ()
    return tuple(type(m) for m in _get_current_dispatch_mode_stack())


def _candidates(tile: int) -> list[int]:
    """``tile``, then smaller tiles down to 1: ``tile``·3/4, ``tile``/2, ``tile``·3/8, ..."""
    out, t = [], tile
    while t >= 1:
        out += [t, t * 3 // 4]
        t //= 2
    return sorted({c for c in out if c >= 1}, reverse=True)


def _position_free_tile(
    func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], per_row: dict[Where, Any], tile: int
) -> tuple[int, bool]:
    """The largest tile (of :func:`_candidates`) at which ``func`` gives a row the same bits at
    every position (:func:`_rows_alike`), with the rows laid out as given or, for 2-D rows, with
    each column of the tile contiguous; measured once per op and argument shapes. GEMM kernels
    may compute the rows of a tile with other micro-kernel lanes (measured on an AMD EPYC: a Linear
    of 257 inputs to 11 outputs gives rows 1-3 of every 4 other bits than row 0), so a fixed tile
    alone does not make a row's bits independent of where it sits; a tile whose every row is
    computed alike does. One row per call always is."""
    key = (func, _signature(args, kwargs, per_row), tile, torch.get_num_threads(), _modes_below())
    if key not in _TILES:
        if len(_TILES) >= 4096:  # shapes without end (every sequence length): measured again, not kept
            _TILES.clear()
        flat = all(a.dim() == 2 for a in per_row.values())
        tries = [(t, last) for t in _candidates(tile) if t > 1 for last in ((False, True) if flat else (False,))]
        _TILES[key] = next((c for c in tries if _rows_alike(func, args, kwargs, per_row, *c)), (1, False))
    return _TILES[key]


def _rows_alike(
    func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], per_row: dict[Where, Any], t: int, rows_last: bool
) -> bool:
    """Whether a tile of ``t`` copies of one row gives that row the same bits at every position,
    for the call's first row and for its last."""
    for row in (0, -1):
        cut = {w: _fresh(a[row:][:1].expand(t, *a.shape[1:]), t, _order(a, rows_last)) for w, a in per_row.items()}
        for o in _outputs(_call(func, args, kwargs, cut)):
            if o.shape[0] == t and not all(torch.equal(_bits(o[p]), _bits(o[0])) for p in range(1, t)):
                return False
    return True


def _tiled(func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], rows: tuple[int, ...], tile: int) -> Any:
    """``func`` on tiles of exactly one size, each a fresh copy of its rows (the last padded with
    zeros), the results joined and cut back to the batch: the tile is the largest at most
    ``tile`` whose rows this CPU's kernels compute alike at every position."""
    batch = args[rows[0]].shape[0]
    if batch == 0:
        return func(*args, **kwargs)
    per_row = _per_row(func, args, kwargs, rows)
    size, rows_last = _position_free_tile(func, args, kwargs, per_row, tile)
    orders = {w: _order(a, rows_last) for w, a in per_row.items()}
    outs = [
        _call(func, args, kwargs, {w: _fresh(a[k : k + size], size, orders[w]) for w, a in per_row.items()})
        for k in range(0, batch, size)
    ]
    if isinstance(outs[0], tuple):  # fused attention: (output, weights), each cut back
        return tuple(
            parts[0] if not isinstance(parts[0], torch.Tensor) or not parts[0].dim() else torch.cat(parts)[:batch]
            for parts in zip(*outs)
        )  # weights not asked for are None (or empty)
    return torch.cat(outs)[:batch]


def batch_invariant(tile: int = TILE, kernels: bool | None = None) -> BatchInvariant:
    """A context in which a row's bits do not depend on its batch: matmuls, linear layers,
    convolutions and attention run on fixed tiles of ``tile`` rows (padded), so every call has
    the shape it has for a batch of one. Costs what the padding and the extra calls cost (a batch
    of one runs ``tile`` rows); measured by ``bench/batch_invariant.py``.

    ``kernels``: ``None`` (default) runs CUDA tensors' matmuls, softmax, ``mean`` and attention
    on samebits' fixed-order Triton kernels where Triton is installed (no padding; not yet run
    on a GPU); ``False`` keeps the tiles everywhere; ``True`` takes the kernels for every tensor
    (CPU tensors only under ``TRITON_INTERPRET=1``, Triton's interpreter: how they are tested)."""
    return BatchInvariant(tile, kernels)


@contextlib.contextmanager
def batch_invariant_forwards(model: nn.Module, tile: int = TILE) -> Iterator[nn.Module]:
    """Every forward of ``model`` inside :func:`batch_invariant` for the block (its module names
    and hooks unchanged), the hooks removed after."""
    modes: list[BatchInvariant] = []

    def enter(module: nn.Module, inputs: Any) -> None:
        mode = BatchInvariant(tile)
        mode.__enter__()
        modes.append(mode)

    def leave(module: nn.Module, inputs: Any, output: object) -> None:
        if modes:
            modes.pop().__exit__(None, None, None)

    handles = [model.register_forward_pre_hook(enter), model.register_forward_hook(leave, always_call=True)]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
        while modes:
            modes.pop().__exit__(None, None, None)


def tiles_of(batch_invariant: bool | int, backend: str) -> int | None:
    """The tile size ``batch_invariant=`` asks for (``True``: the default), or ``None``."""
    if batch_invariant is False or batch_invariant is None:
        return None
    if backend != "eager":
        raise UserError(
            f"batch_invariant runs the model's ops through samebits' tiles, which a compiled backend bypasses; "
            f"use backend='eager', not {backend!r}"
        )
    tile = TILE if batch_invariant is True else batch_invariant
    if not isinstance(tile, int) or isinstance(tile, bool) or tile < 1:
        raise UserError(f"batch_invariant must be True, False or a positive tile size, not {batch_invariant!r}")
    return tile
