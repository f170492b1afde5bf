"""Two answers compared bit for bit: their raw bytes per output, and where they differ the first
output and element that do, how many elements, and the largest absolute difference."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from samebits.probe.wire import NUMPY, TEXT, Answer, Tensor


@dataclasses.dataclass(frozen=True)
class Difference:
    """How an answer differs from the reference answer to the same input."""

    output: str  # the first output (in the reference's order) that differs
    element: tuple[int, ...] | None  # its first element that differs (None: names, datatypes or shapes differ)
    count: int  # elements of that output that differ
    size: int  # elements in that output
    max_abs: float | None  # the largest absolute difference over every numeric output (None: none numeric)
    expected: str  # the reference's value there, and the other answer's
    got: str

    def line(self) -> str:
        """``output logits[0, 5]: -0.1234567 then -0.1234568 (3 of 10 values differ, max abs diff 1.5e-08)``."""
        if self.element is None:
            return f"output {self.output}: {self.expected} then {self.got}"
        where = f"{self.output}[{', '.join(map(str, self.element))}]"
        extent = f"{self.count} of {self.size} values differ"
        if self.max_abs is not None:
            extent += f", max abs diff {self.max_abs:.3g}"
        return f"output {where}: {self.expected} then {self.got} ({extent})"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["element"] = list(self.element) if self.element is not None else None
        return data


def difference(reference: Answer, other: Answer) -> Difference | None:
    """``None`` where every output has the same name, datatype, shape and bytes; else the first
    difference, with the largest absolute difference over all numeric outputs."""
    theirs = {t.name: t for t in other}
    first: Difference | None = None
    widest: float | None = None
    for ref in reference:
        got = theirs.get(ref.name)
        if got is None:
            first = first or Difference(ref.name, None, 0, 0, None, "present", "missing")
            continue
        if got.raw == ref.raw and got.datatype == ref.datatype and got.shape == ref.shape:
            continue
        found = _tensor_difference(ref, got)
        if found.max_abs is not None:
            widest = found.max_abs if widest is None else max(widest, found.max_abs)
        first = first or found
    extra = [t.name for t in other if t.name not in {r.name for r in reference}]
    if first is None and extra:
        first = Difference(extra[0], None, 0, 0, None, "absent", "present")
    if first is None:
        return None
    return dataclasses.replace(first, max_abs=widest)


def _tensor_difference(ref: Tensor, got: Tensor) -> Difference:
    if got.datatype != ref.datatype or got.shape != ref.shape:
        return Difference(
            ref.name, None, 0, 0, None, f"{ref.datatype}{list(ref.shape)}", f"{got.datatype}{list(got.shape)}"
        )
    a, b = ref.values(), got.values()
    if ref.datatype == TEXT:
        differs = a != b
    else:  # bits, not values: -0.0 and 0.0 differ, a NaN equals the same NaN
        bits = np.dtype(f"<u{NUMPY[ref.datatype].itemsize}")
        differs = np.frombuffer(ref.raw, dtype=bits) != np.frombuffer(got.raw, dtype=bits)
        differs = differs.reshape(a.shape)
    index = tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else ()
    max_abs = None
    if ref.datatype != TEXT and ref.datatype != "BOOL":
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(a.astype(np.float64) - b.astype(np.float64))[differs]
        max_abs = float(np.nan_to_num(gap, nan=np.inf).max()) if gap.size else 0.0
    if ref.datatype == TEXT:  # where in the text: a short window around the first character that differs
        return Difference(ref.name, index, int(differs.sum()), int(a.size), None, *_texts(str(a[index]), str(b[index])))
    return Difference(ref.name, index, int(differs.sum()), int(a.size), max_abs, _value(a, index), _value(b, index))


TEXT_WINDOW = 12  # characters shown on each side of the first one that differs


def _texts(a: str, b: str) -> tuple[str, str]:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - TEXT_WINDOW)

    def window(text: str) -> str:
        cut = text[start : at + TEXT_WINDOW]
        return ("..." if start else "") + repr(cut) + ("..." if at + TEXT_WINDOW < len(text) else "")

    return f"{window(a)} (character {at})", window(b)


def _value(array: np.ndarray, index: tuple[int, ...]) -> str:
    value = array[index] if array.ndim else array.item()
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, np.floating):
        return str(value)  # the shortest repr of its own width: 0.6455251 for a float32
    return str(value.item() if hasattr(value, "item") else value)


def same(a: Answer, b: Answer) -> bool:
    """Whether two answers hold the same outputs with the same bytes."""
    return difference(a, b) is None


def groups(answers: list[list[Answer]]) -> list[list[int]]:
    """Indices of the runs whose answers (one per probe input) are all the same, grouped; the
    group of run 0 first."""
    found: list[list[int]] = []
    for i, run in enumerate(answers):
        for group in found:
            head = answers[group[0]]
            if len(head) == len(run) and all(same(x, y) for x, y in zip(head, run)):
                group.append(i)
                break
        else:
            found.append([i])
    return found
