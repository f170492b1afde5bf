"""Which comparison a verification applies: bits, the user's tolerance, or torch's per-dtype
defaults when the machine differs in a field that changes bits."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from samebits.fingerprint import FieldChange
from samebits.tensors.compare import Comparison, check_tolerances, compare_leaves, tolerances_for


@dataclasses.dataclass
class Policy:
    kind: str  # "exact" | "tolerance" | "dtype-defaults"
    reason: str
    atol: float = 0.0
    rtol: float = 0.0

    def compare(self, path: str, expected: Any, actual: Any) -> Comparison:
        """Compare one leaf under this policy (per-dtype tolerances looked up per tensor)."""
        atol, rtol = self.atol, self.rtol
        if self.kind == "dtype-defaults" and isinstance(expected, torch.Tensor):
            rtol, atol = tolerances_for(expected.dtype)
        return compare_leaves(expected, actual, atol=atol, rtol=rtol, path=path)


def choose_policy(
    changes: list[FieldChange],
    unreadable: str | None,
    *,
    exact: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
) -> Policy:
    """``--exact`` wins, then ``--atol/--rtol``; otherwise bits when no bit-relevant field of the
    fingerprint changed, and torch's per-dtype tolerances when one did."""
    if exact and (atol is not None or rtol is not None):
        from samebits.errors import UserError

        raise UserError("give --exact or --atol/--rtol, not both")
    if exact:
        return Policy("exact", "--exact was given")
    if atol is not None or rtol is not None:
        a, r = check_tolerances(atol, rtol)
        return Policy("tolerance", f"--atol {a:g} --rtol {r:g} were given", a, r)
    relevant = [c for c in changes if c.affects_bits]
    if unreadable:
        return Policy("dtype-defaults", f"{unreadable}: torch's per-dtype tolerances")
    if not relevant:
        return Policy("exact", "the fingerprint matches in every field that changes bits, so bits must match")
    names = ", ".join(c.field for c in relevant[:4]) + (" ..." if len(relevant) > 4 else "")
    return Policy(
        "dtype-defaults", f"{len(relevant)} field(s) that change bits differ ({names}): torch's per-dtype tolerances"
    )
