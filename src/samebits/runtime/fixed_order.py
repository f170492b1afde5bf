"""Fixed-order kernels for :func:`samebits.batch_invariant` on CUDA: matmuls (``mm``, ``addmm``,
``bmm``, ``baddbmm``, ``linear``, ``matmul``), softmax and log-softmax, ``mean`` over trailing
dims and attention (its two matmuls and softmax), written in Triton with one fixed tile shape and
no split-K. Each output element is reduced in one program, over the same blocks in the same order,
whatever the batch: a row's bits cannot depend on how many rows share its call, with no tiles of
padding and no calibration. cuBLAS and cuDNN choose algorithms (and split the reduction) by shape,
batch included; flash attention splits the keys by how many (batch, head) blocks fill the GPU.

Every launch runs on the device of its tensors (Triton launches on the current device), with
floating-point fusion pinned, and a batch or a width past CUDA's grid limits is split into several
launches of the same per-row program (the bits do not move). Tested on the CPU under Triton's
interpreter (``TRITON_INTERPRET=1``); not yet run on a GPU. Where a call is outside what the
kernels cover (float64, a reduction over the batch's dim, a dropout) it returns
``NotImplemented`` and the caller falls back to fixed row tiles.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch._ops import OpOverload

aten = torch.ops.aten

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32  # the one matmul tile: never chosen by shape
BLOCK_ROW = 256  # columns a row-wise program reduces at a time
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# CUDA's largest grid along y and z (x goes to 2**31 - 1): a matmul's batch is z, its column
# tiles y; past them a launch fails with "invalid argument" (not an out-of-memory error)
MAX_GRID_Y = MAX_GRID_Z = 65_535
# Triton fuses a * b + c into one FMA where this is on: other bits than two roundings. Its default
# is announced to flip in Triton 3.10 (and TRITON_DEFAULT_FP_FUSION sets it), so every launch asks
# for it explicitly; only TRITON_FORCE_DISABLE_FP_FUSION still overrides it (in the fingerprint)
FP_FUSION = True


@functools.cache
def unavailable() -> str | None:
    """Why the kernels cannot run here (Triton missing), or ``None``."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the fixed-order kernels need Triton (pip install triton; it comes with torch's CUDA builds)"
    return None


@functools.cache
def _kernels() -> Any:
    """The Triton kernels, built on first use (Triton's interpreter, which runs them on CPU tensors
    for the tests, is chosen by ``TRITON_INTERPRET=1`` in the environment when triton is imported)."""
    import triton
    import triton.language as tl

    @triton.jit
    def matmul(  # type: ignore[no-untyped-def]  # Triton's argument types, not Python's
        a, b, c, bias, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sxb, sxm, sxn, alpha, beta,
        HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    ):  # fmt: skip
        batch = tl.program_id(2).to(tl.int64)
        rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
        rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK).to(tl.int64)  # offsets along K past 2**31 elements stay right
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):  # one program, every K block in order: no split-K
            kk = k0 + rk
            x = tl.load(a + batch * sab + rm[:, None] * sam + kk[None, :] * sak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)  # fmt: skip
            y = tl.load(b + batch * sbb + kk[:, None] * sbk + rn[None, :] * sbn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
            acc = tl.dot(x, y, acc, input_precision=PRECISION)
        acc = acc * alpha
        inside = (rm[:, None] < M) & (rn[None, :] < N)
        if HAS_BIAS:
            extra = tl.load(bias + batch * sxb + rm[:, None] * sxm + rn[None, :] * sxn, mask=inside, other=0.0)
            acc = acc + beta * extra.to(tl.float32)
        tl.store(c + batch * scb + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty), mask=inside)

    @triton.jit
    def softmax(x, y, C, sx, sy, LOG: tl.constexpr, SAFE: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK).to(tl.int64)
        top = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        for c0 in range(0, C, BLOCK):
            v = tl.load(x + row * sx + c0 + cols, mask=c0 + cols < C, other=float("-inf")).to(tl.float32)
            top = tl.maximum(top, v)
        peak = tl.max(top, axis=0)
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, C, BLOCK):
            v = tl.load(x + row * sx + c0 + cols, mask=c0 + cols < C, other=float("-inf")).to(tl.float32)
            total += tl.exp(v - peak)
        norm = tl.sum(total, axis=0)
        for c0 in range(0, C, BLOCK):
            v = tl.load(x + row * sx + c0 + cols, mask=c0 + cols < C, other=float("-inf")).to(tl.float32)
            if LOG:
                out = v - peak - tl.log(norm)
            else:
                out = tl.exp(v - peak) / norm
                if SAFE:  # a row with every entry -inf (attention with every key masked) is 0, not NaN
                    out = tl.where(peak == float("-inf"), 0.0, out)
            tl.store(y + row * sy + c0 + cols, out.to(y.dtype.element_ty), mask=c0 + cols < C)

    @triton.jit
    def row_mean(x, y, C, sx, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK).to(tl.int64)
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, C, BLOCK):
            total += tl.load(x + row * sx + c0 + cols, mask=c0 + cols < C, other=0.0).to(tl.float32)
        tl.store(y + row, (tl.sum(total, axis=0) / C).to(y.dtype.element_ty))

    return triton, matmul, softmax, row_mean


def _on(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``device`` made current for a launch: Triton launches on the current CUDA device, not the
    one its pointers are on (``cuda:1``'s tensors from ``cuda:0``: "Pointer argument cannot be
    accessed from Triton")."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _launch(kernel: Any, grid: tuple[int, ...], device: torch.device, *args: Any, **meta: Any) -> None:
    """One launch of ``kernel`` over ``grid`` on ``device``, floating-point fusion pinned."""
    with _on(device):
        kernel[grid](*args, **meta, enable_fp_fusion=FP_FUSION)


def _spans(total: int, most: int) -> Iterator[tuple[int, int]]:
    """``[start, stop)`` ranges of at most ``most`` covering ``range(total)``, in order."""
    for start in range(0, total, most):
        yield start, min(start + most, total)


def _precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s input precision: TF32 for float32 only where torch's matmul allows it (the
    deterministic profile does not), as cuBLAS would."""
    from samebits.determinism.precision import tf32_matmuls_allowed

    return "tf32" if dtype is torch.float32 and tf32_matmuls_allowed() else "ieee"


def _floats(*tensors: Any) -> bool:
    first = tensors[0]
    return all(
        isinstance(t, torch.Tensor) and t.dtype in FLOATS and t.dtype == first.dtype and t.device == first.device
        for t in tensors
    )


def bmm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, beta: float = 1, alpha: float = 1) -> Any:
    """``beta * bias + alpha * (a @ b)`` for ``a`` (B, M, K), ``b`` (B, K, N) and a ``bias``
    broadcast to (B, M, N), in fixed tiles with no split-K; ``NotImplemented`` outside it."""
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] or not _floats(a, b):
        return NotImplemented
    batch, m, k = a.shape
    n = b.shape[2]
    out = torch.empty((batch, m, n), dtype=a.dtype, device=a.device)
    if beta == 0:
        bias = None  # torch ignores the bias then (NaN in it included)
    extra: torch.Tensor = out  # a placeholder the kernel never reads without a bias
    if bias is not None:
        if not _floats(a, bias) or bias.dim() > 3:
            return NotImplemented
        try:
            extra = bias.expand(batch, m, n)  # broadcast: strides of 0, no copy
        except RuntimeError:
            return NotImplemented
    if out.numel() == 0:
        return out
    if k == 0 or alpha == 0:  # no product (torch ignores it at alpha 0, inf in it included)
        return out.zero_() if bias is None else out.copy_(extra * beta)
    triton, matmul, _, _ = _kernels()
    # past CUDA's grid limits, several launches over slices of the batch (z) and of the column
    # tiles (y, cut at a tile's edge): each output tile is still one program over K, in order
    for b0, b1 in _spans(batch, MAX_GRID_Z):
        for n0, n1 in _spans(n, MAX_GRID_Y * BLOCK_N):
            part_a, part_b = a[b0:b1], b[b0:b1, :, n0:n1]
            part_out, part_extra = out[b0:b1, :, n0:n1], extra[b0:b1, :, n0:n1]
            grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n1 - n0, BLOCK_N), b1 - b0)
            _launch(
                matmul, grid, out.device,
                part_a, part_b, part_out, part_extra, m, n1 - n0, k,
                *part_a.stride(), *part_b.stride(), *part_out.stride(), *part_extra.stride(),
                float(alpha), float(beta), HAS_BIAS=bias is not None, PRECISION=_precision(a.dtype),
                BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K,
            )  # fmt: skip
    return out


def mm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, beta: float = 1, alpha: float = 1) -> Any:
    """:func:`bmm` for 2-D ``a`` and ``b`` (``addmm`` with a bias)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != 2 or b.dim() != 2:
        return NotImplemented
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.dim() > 2):
        return NotImplemented
    out = bmm(a[None], b[None], None if bias is None else bias[None] if bias.dim() else bias, beta, alpha)
    return out if out is NotImplemented else out[0]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
    """``x @ weight.T + bias`` over every leading dim of ``x``."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return NotImplemented
    out = mm(x.reshape(-1, x.shape[-1]), weight.t(), bias)
    return out if out is NotImplemented else out.reshape(*x.shape[:-1], weight.shape[0])


def matmul(a: torch.Tensor, b: torch.Tensor) -> Any:
    """``torch.matmul`` for operands of 2 or more dims (the batch dims broadcast)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() < 2 or b.dim() < 2:
        return NotImplemented
    if b.dim() == 2:
        out = mm(a.reshape(-1, a.shape[-1]), b)
        return out if out is NotImplemented else out.reshape(*a.shape[:-1], b.shape[-1])
    try:
        lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        return NotImplemented
    left = a.expand(*lead, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
    right = b.expand(*lead, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = bmm(left, right)
    return out if out is NotImplemented else out.reshape(*lead, a.shape[-2], b.shape[-1])


def _rows(x: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, list[int]] | None:
    """``x`` as (rows, columns), the ``dims`` last; ``None`` where a dim is the batch's (dim 0
    of a tensor of 2 or more dims: a reduction over rows is not a row's own)."""
    if x.dim() == 0 or not all(-x.dim() <= d < x.dim() for d in dims):
        return None  # torch raises its own error for a dim out of range
    normalized = [d % x.dim() for d in dims]
    dims = sorted(set(normalized))
    if len(dims) != len(normalized) or not dims or (0 in dims and x.dim() > 1):
        return None  # a dim named twice: torch's error too
    kept = [d for d in range(x.dim()) if d not in dims]
    order = kept + dims
    columns = math.prod(x.shape[d] for d in dims)
    return x.permute(order).contiguous().reshape(-1, columns), order


def softmax(x: torch.Tensor, dim: int, log: bool = False, dtype: torch.dtype | None = None, safe: bool = False) -> Any:
    """Softmax (or log-softmax) over ``dim``, each row reduced in one program in a fixed order;
    ``safe``: a row of only ``-inf`` gives zeros (torch's ``_safe_softmax``), not NaN."""
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOATS or (dtype is not None and dtype not in FLOATS):
        return NotImplemented
    flat = _rows(x.to(dtype) if dtype is not None else x, [dim])
    if flat is None:
        return NotImplemented
    rows, order = flat
    out = torch.empty_like(rows)
    if rows.numel():
        _, _, kernel, _ = _kernels()
        _launch(
            kernel, (rows.shape[0],), rows.device,
            rows, out, rows.shape[1], rows.stride(0), out.stride(0), LOG=log, SAFE=safe, BLOCK=BLOCK_ROW,
        )  # fmt: skip
    shaped = out.reshape([x.shape[d] for d in order])
    # dense in x's dim order, as torch's softmax gives it (a later .view() relies on it)
    return shaped.permute([order.index(d) for d in range(x.dim())]).contiguous()


def mean(x: torch.Tensor, dims: Any, keepdim: bool = False, dtype: torch.dtype | None = None) -> Any:
    """``x.mean(dims)`` over dims that are not the batch's, each row summed in a fixed order."""
    if dims is None or not isinstance(x, torch.Tensor) or x.dtype not in FLOATS:
        return NotImplemented
    dims = [dims] if isinstance(dims, int) else list(dims)
    if dtype is not None and dtype not in FLOATS:
        return NotImplemented
    flat = _rows(x.to(dtype) if dtype is not None else x, dims)
    if flat is None or flat[0].shape[1] == 0:
        return NotImplemented
    rows, order = flat
    out = torch.empty(rows.shape[0], dtype=rows.dtype, device=rows.device)
    if rows.shape[0]:
        _, _, _, kernel = _kernels()
        _launch(kernel, (rows.shape[0],), rows.device, rows, out, rows.shape[1], rows.stride(0), BLOCK=BLOCK_ROW)
    reduced = set(order[x.dim() - len(dims) :])  # _rows put the reduced dims last (each once)
    shape = [1 if d in reduced else x.shape[d] for d in range(x.dim())]
    out = out.reshape(shape)
    return out if keepdim else out.reshape([x.shape[d] for d in range(x.dim()) if d not in reduced])


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """``scaled_dot_product_attention`` as torch's math backend computes it: float16 and bfloat16
    inputs taken to float32 first (scores and weights in the input's dtype had 1.7x to 8x the
    math backend's error, and float16 scores can overflow), ``q`` and ``k`` each scaled by the
    scale's square root, then two fixed-order matmuls and a fixed-order softmax, the output cast
    back (memory grows with queries x keys, as the math backend's)."""
    if dropout_p or not _floats(q, k, v) or q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        return NotImplemented
    if is_causal and attn_mask is not None:
        return NotImplemented  # torch's error
    given = q.dtype
    if given in (torch.float16, torch.bfloat16) and not _reduced_math_attention():
        q, k, v = q.float(), k.float(), v.float()
    if enable_gqa and q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        repeat = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(repeat, dim=-3), v.repeat_interleave(repeat, dim=-3)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    root = math.sqrt(abs(factor))  # the math backend's order: q and k scaled before their product
    scores = matmul(q * (-root if factor < 0 else root), (k * root).transpose(-2, -1))
    if scores is NotImplemented:
        return NotImplemented
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = softmax(scores, -1, safe=True)  # a query with every key masked: zeros, as torch's math
    if weights is NotImplemented:
        return NotImplemented
    out = matmul(weights, v)
    return out if out is NotImplemented else out.to(given)


def _reduced_math_attention() -> bool:
    """Whether torch's math attention is allowed to keep float16/bfloat16 reductions in their
    own dtype (``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)``; off by default)."""
    allowed = getattr(torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", None)
    return bool(allowed()) if allowed is not None else False


def _mm_call(a: torch.Tensor, b: torch.Tensor) -> Any:
    return mm(a, b)


def _addmm_call(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> Any:
    return mm(a, b, bias, beta, alpha)


def _baddbmm_call(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> Any:
    return bmm(a, b, bias, beta, alpha)


def _softmax_int(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> Any:
    return softmax(x, dim, dtype=dtype)


def _safe_softmax_call(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> Any:
    return softmax(x, dim, dtype=dtype, safe=True)


def _log_softmax_int(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> Any:
    return softmax(x, dim, log=True, dtype=dtype)


def _softmax_raw(x: torch.Tensor, dim: int, half_to_float: bool) -> Any:
    return softmax(x, dim, dtype=torch.float32 if half_to_float else None)


def _log_softmax_raw(x: torch.Tensor, dim: int, half_to_float: bool) -> Any:
    return softmax(x, dim, log=True, dtype=torch.float32 if half_to_float else None)


def overloads(table: dict[str, Any]) -> dict[Any, Any]:
    """``{"op.overload": value}`` as ``{aten.op.overload: value}`` for the ops this torch has
    (``_safe_softmax`` came with torch 2.5; the package declares torch >= 2.2)."""
    found = {}
    for name, value in table.items():
        op, overload = name.split(".")
        packet = getattr(aten, op, None)  # torch.ops.aten raises AttributeError for an op it lacks
        if packet is not None and hasattr(packet, overload):
            found[getattr(packet, overload)] = value
    return found


CALLS: dict[Any, Any] = overloads(
    {
        "mm.default": _mm_call,
        "addmm.default": _addmm_call,
        "bmm.default": bmm,
        "baddbmm.default": _baddbmm_call,
        "linear.default": linear,
        "matmul.default": matmul,
        "softmax.int": _softmax_int,
        "_softmax.default": _softmax_raw,
        "_safe_softmax.default": _safe_softmax_call,  # attention's softmax outside inference mode
        "log_softmax.int": _log_softmax_int,
        "_log_softmax.default": _log_softmax_raw,
        "mean.dim": mean,
        "scaled_dot_product_attention.default": attention,
    }
)


def call(func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` through the fixed-order kernels, or ``NotImplemented`` where
    they do not cover it (the caller's fallback runs then)."""
    impl = CALLS.get(func)
    if impl is None or any(isinstance(t, torch.Tensor) and t.numel() == 0 for t in (*args, *kwargs.values())):
        return NotImplemented  # empty tensors: nothing to order, torch's shapes and errors
    return impl(*args, **kwargs)
