"""Compare two outputs path by path: bits, tolerance, ULPs, and messages like ``torch.testing``."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

import torch

from samebits.errors import UserError
from samebits.tensors.digest import leaf_digest
from samebits.tensors.tree import flatten

Verdict = Literal["identical", "close", "diverged"]

# torch.testing.assert_close's per-dtype defaults: (rtol, atol).
_DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (1e-3, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}

# Signed integer views of each float dtype, for ULP distances.
_INT_VIEW = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


class Tolerances(NamedTuple):
    """A tolerance pair, by name: ``compare(a, b, **tolerances_for(dtype)._asdict())``."""

    rtol: float
    atol: float


_SEVERITY = {"identical": 0, "close": 1, "diverged": 2}


def worst_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    """The worst of comparison verdicts (diverged > close > identical); ``identical`` for none."""
    return max(verdicts, key=_SEVERITY.__getitem__, default="identical")


def tolerances_for(dtype: torch.dtype) -> Tolerances:
    """torch's default tolerances for ``dtype`` (``rtol``, ``atol``); zero for exact types."""
    return Tolerances(*_DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0)))


def check_tolerances(atol: float | None, rtol: float | None) -> tuple[float, float]:
    """Validate a user's ``atol``/``rtol`` pair: both or neither (neither means exact)."""
    if (atol is None) != (rtol is None):
        raise UserError(
            "give atol and rtol both or neither: with only one, the other's default could hide a difference"
        )
    atol, rtol = atol or 0.0, rtol or 0.0
    if atol < 0 or rtol < 0 or math.isnan(atol) or math.isnan(rtol):
        raise UserError(f"tolerances must be >= 0 (got atol={atol}, rtol={rtol})")
    return atol, rtol


@dataclasses.dataclass
class Comparison:
    """The comparison of one leaf (one output path)."""

    path: str
    verdict: Verdict
    reason: str = ""
    dtype: str | None = None
    shape: list[int] | None = None
    numel: int = 0
    differing: int = 0  # elements whose bits differ
    mismatched: int = 0  # elements outside the tolerance
    max_abs: float = 0.0
    max_abs_index: list[int] | None = None
    max_rel: float = 0.0
    max_rel_index: list[int] | None = None
    max_ulp: int | None = None
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def identical(self) -> bool:
        return self.verdict == "identical"

    def message(self) -> str:
        """A multi-line explanation in the style of ``torch.testing.assert_close``."""
        if self.verdict == "identical":
            return "Bits are identical."
        if self.reason:
            return self.reason
        pct = 100.0 * self.mismatched / self.numel if self.numel else 0.0
        lines = []
        if self.verdict == "close":
            lines.append(f"Bits differ in {self.differing} / {self.numel} elements, all within tolerance.")
        else:
            lines.append(f"Mismatched elements: {self.mismatched} / {self.numel} ({pct:.1f}%)")
        lines.append(
            f"Greatest absolute difference: {self.max_abs:.6g} at index {_idx(self.max_abs_index)} (up to {self.atol:g} allowed)"
        )
        lines.append(
            f"Greatest relative difference: {self.max_rel:.6g} at index {_idx(self.max_rel_index)} (up to {self.rtol:g} allowed)"
        )
        if self.max_ulp is not None:
            lines.append(f"Greatest ULP distance: {self.max_ulp}")
        return "\n".join(lines)

    def brief(self) -> str:
        """A few words: ``"max abs 4.8e-07 at .logits"``, or the reason where no value differs
        (a missing path, another shape or dtype, NaN or signed-zero bits)."""
        where = self.path or "<output>"
        if self.identical:
            return "identical bits"
        if self.max_abs > 0:
            return f"max abs {self.max_abs:.2g} at {where}"
        if self.reason:
            return self.reason.splitlines()[0]
        return f"{self.differing} element(s) at {where} differ in bits but not in value (NaN payloads or signed zeros)"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _idx(index: list[int] | None) -> str:
    return str(tuple(index)) if index is not None else "()"


@dataclasses.dataclass
class TreeComparison:
    """The comparison of two whole outputs, one :class:`Comparison` per path."""

    items: list[Comparison]

    @property
    def verdict(self) -> Verdict:
        return worst_verdict(c.verdict for c in self.items)

    @property
    def identical(self) -> bool:
        return self.verdict == "identical"

    @property
    def ok(self) -> bool:
        """True when every path is identical or within tolerance."""
        return self.verdict != "diverged"

    def first_difference(self) -> Comparison | None:
        return next((c for c in self.items if c.verdict != "identical"), None)

    def __str__(self) -> str:
        worst = next((c for c in self.items if c.verdict == "diverged"), None) or self.first_difference()
        if worst is None:
            return f"All {len(self.items)} outputs have identical bits."
        where = worst.path or "<output>"
        return f"{worst.message()}\nThe failure occurred for item {where}"

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "items": [c.to_dict() for c in self.items]}


def compare(a: object, b: object, *, atol: float | None = None, rtol: float | None = None) -> TreeComparison:
    """Compare two model outputs (any nesting :func:`flatten` accepts), path by path.

    ``atol`` and ``rtol`` are given both or neither; neither means bits must match.
    """
    atol_, rtol_ = check_tolerances(atol, rtol)
    return compare_trees(flatten(a), flatten(b), atol=atol_, rtol=rtol_)


def compare_trees(
    a: dict[str, Any],
    b: dict[str, Any],
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    leaf: Callable[[str, Any, Any], Comparison] | None = None,
    sides: tuple[str, str] = ("the first output", "the second output"),
) -> TreeComparison:
    """Compare two flattened outputs; a path present in only one side diverges.

    ``leaf(path, a, b)`` replaces the per-leaf comparison (e.g. per-dtype tolerances);
    ``sides`` names the two sides in the messages about missing paths."""
    compare_leaf = leaf or (lambda path, x, y: compare_leaves(x, y, atol=atol, rtol=rtol, path=path))
    items = []
    for path in list(a) + [p for p in b if p not in a]:
        if path not in b:
            items.append(Comparison(path, "diverged", reason=f"Path {path or '<output>'} is missing in {sides[1]}."))
        elif path not in a:
            items.append(Comparison(path, "diverged", reason=f"Path {path or '<output>'} is missing in {sides[0]}."))
        else:
            items.append(compare_leaf(path, a[path], b[path]))
    return TreeComparison(items)


def compare_leaves(a: object, b: object, *, atol: float = 0.0, rtol: float = 0.0, path: str = "") -> Comparison:
    """Compare two leaves: tensors by bits and tolerance, numbers as tensors, others by equality."""
    if _is_number(a) and _is_number(b):
        a, b = torch.tensor(a), torch.tensor(b)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return compare_tensors(a, b, atol, rtol, path)
    if type(a) is type(b) and leaf_digest(a) == leaf_digest(b):
        return Comparison(path, "identical")
    return Comparison(path, "diverged", reason=f"Values differ: {a!r} != {b!r}")


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def compare_tensors(
    a: torch.Tensor, b: torch.Tensor, atol: float = 0.0, rtol: float = 0.0, path: str = ""
) -> Comparison:
    """Compare two tensors element by element; NaN against NaN at the same place counts as equal."""
    a, b = a.detach().cpu(), b.detach().cpu()
    made = functools.partial(
        Comparison,
        path=path,
        dtype=str(a.dtype).removeprefix("torch."),
        shape=list(a.shape),
        numel=a.numel(),
        atol=atol,
        rtol=rtol,
    )
    if a.shape != b.shape:
        return made(verdict="diverged", reason=f"Shapes do not match: {tuple(a.shape)} != {tuple(b.shape)}")
    if a.dtype != b.dtype:
        return made(verdict="diverged", reason=f"Dtypes do not match: {a.dtype} != {b.dtype}")
    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    if a.dtype == torch.bool:
        a, b = a.to(torch.uint8), b.to(torch.uint8)
    same_bits = _same_bits(a, b)
    differing = int((~same_bits).sum())
    if differing == 0:
        return made(verdict="identical")
    af, bf = a.to(torch.float64), b.to(torch.float64)
    both_nan = torch.isnan(af) & torch.isnan(bf)
    abs_diff = torch.where(both_nan, torch.zeros_like(af), (af - bf).abs())
    abs_diff = torch.where(torch.isnan(abs_diff), torch.full_like(af, math.inf), abs_diff)  # NaN against a number
    rel_diff = abs_diff / bf.abs()
    rel_diff = torch.where(abs_diff == 0, torch.zeros_like(rel_diff), rel_diff)
    allowed = atol + rtol * bf.abs()
    outside = ~same_bits & ~(abs_diff <= allowed)
    mismatched = int(outside.sum())
    return made(
        verdict="diverged" if mismatched else "close",
        differing=differing,
        mismatched=mismatched,
        max_abs=float(abs_diff.max()),
        max_abs_index=_unravel(int(abs_diff.argmax()), a.shape),
        max_rel=float(rel_diff.nan_to_num(nan=0.0).max()),
        max_rel_index=_unravel(int(rel_diff.nan_to_num(nan=0.0).argmax()), a.shape),
        max_ulp=ulp_distance(a, b),
    )


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        iview = _INT_VIEW.get(a.dtype)
        if iview is not None:
            both_nan = torch.isnan(a) & torch.isnan(b)
            return (a.view(iview) == b.view(iview)) | both_nan
        return (a == b) | (torch.isnan(a) & torch.isnan(b))
    return a == b


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return list(reversed(index))


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> int | None:
    """Greatest distance in units in the last place between ``a`` and ``b`` (float dtypes only).

    NaNs at the same place are skipped; -0.0 and 0.0 are 0 ULP apart.
    """
    iview = _INT_VIEW.get(a.dtype)
    if iview is None or a.numel() == 0:
        return None
    keep = ~(torch.isnan(a) | torch.isnan(b))
    if not bool(keep.any()):
        return 0
    oa, ob = _ordered(a[keep], iview), _ordered(b[keep], iview)
    if iview == torch.int64:
        return int(max(abs(int(x) - int(y)) for x, y in zip(oa[_worst(oa, ob)], ob[_worst(oa, ob)])))
    return int((oa - ob).abs().max())


def _worst(oa: torch.Tensor, ob: torch.Tensor) -> torch.Tensor:
    # For float64, differences can overflow int64: find candidates in float, then measure exactly.
    d = (oa.double() - ob.double()).abs()
    return (d >= d.max()).nonzero().flatten()[:16]


def _ordered(t: torch.Tensor, iview: torch.dtype) -> torch.Tensor:
    """Map float bits to integers whose order is the floats' order (sign-magnitude to two's complement)."""
    bits = t.contiguous().view(iview).to(torch.int64)
    width = torch.iinfo(iview).bits
    magnitude = bits & ((1 << (width - 1)) - 1)
    return torch.where(bits < 0, -magnitude, magnitude)
