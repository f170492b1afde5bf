"""What changed in an output, in the user's words: per leaf, flips for integer and boolean leaves
(labels, classes, token ids, masks), value shifts for floats, count changes where a shape differs;
and the change a user notices first (a flipped label before a 1e-4 box shift)."""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

from samebits.tensors.compare import Comparison, TreeComparison

ChangeKind = Literal["count", "flips", "values", "other"]

# What a user notices first: a different number of things, then a thing called by another
# name, then anything else that differs in kind, then a shifted value.
_NOTICED_FIRST: dict[ChangeKind, int] = {"count": 0, "flips": 1, "other": 2, "values": 3}
_EXACT_DTYPES = ("bool", "int", "uint")
_ITEM = re.compile(r"^\[(\d+)\]\.?(.*)$")


@dataclasses.dataclass
class OutputChange:
    """One output leaf that differs: how many elements and by how much, said the way the user
    sees it; ``item``/``key`` split a list-of-dicts path (``[1].labels``: image 1, key labels)."""

    path: str
    kind: ChangeKind
    differing: int
    numel: int
    max_abs: float
    text: str
    item: int | None = None
    key: str | None = None

    def line(self) -> str:
        return f"{self.path or '<output>'}: {self.text}"


def output_changes(result: TreeComparison) -> list[OutputChange]:
    """Every leaf of ``result`` whose bits differ, in output order."""
    return [_change(c) for c in result.items if not c.identical]


def by_notice(changes: list[OutputChange]) -> list[OutputChange]:
    """``changes`` in the order a user notices them: counts, then flips (most first), then other
    differences, then value shifts (largest first); output order among equals."""
    return sorted(changes, key=lambda c: (_NOTICED_FIRST[c.kind], -c.differing if c.kind == "flips" else -c.max_abs))


def most_noticed(changes: list[OutputChange]) -> OutputChange | None:
    """The change a user is most likely to notice, or None for no change."""
    return next(iter(by_notice(changes)), None)


def _change(c: Comparison) -> OutputChange:
    item, key = _split(c.path)
    kind, text = _describe(c)
    return OutputChange(c.path, kind, c.differing, c.numel, c.max_abs, text, item, key)


def _describe(c: Comparison) -> tuple[ChangeKind, str]:
    if c.reason.startswith("Shapes do not match"):
        return "count", c.reason.removeprefix("Shapes do not match: ").replace(" != ", " vs ", 1).join(("shape ", ""))
    if c.reason:
        return "other", c.reason.splitlines()[0]
    if (c.dtype or "").startswith(_EXACT_DTYPES):
        verb = "flip" if c.dtype == "bool" else "differ"
        return "flips", f"{c.differing} of {c.numel} {verb}"
    if c.max_abs > 0:
        return "values", f"{c.differing} of {c.numel} values differ, by up to {c.max_abs:.2g}"
    return "values", f"{c.differing} of {c.numel} differ in bits only (NaN payloads or signed zeros)"


def _split(path: str) -> tuple[int | None, str | None]:
    match = _ITEM.match(path)
    if not match:
        return None, None
    return int(match.group(1)), match.group(2) or None
