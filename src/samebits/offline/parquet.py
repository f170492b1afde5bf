"""Parquet files as samples, through pyarrow (``pip install 'samebits[data]'``): one row is one
sample; columns map to the forward's inputs by name (a file with one column feeds a model with
one input whatever its name); other columns (an id) are left alone. Numbers and (nested, fixed
or equal-length) lists of numbers are read: floats as float32, integers as int64, booleans as
bool. Row groups are read only where a range needs them."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import torch

from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs, forward_parameters
from samebits.offline.sources import BadInput, InputFile, Piece, Shapes, Source, describe, row_shapes


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading Parquet needs pyarrow: pip install 'samebits[data]'") from None
    return pq


def column_map(first: InputFile, model: Model) -> dict[str, Any]:
    """Which columns of the first Parquet file feed which inputs (:func:`map_columns`)."""
    try:
        names = list(_pyarrow().ParquetFile(first.path).schema_arrow.names)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"cannot read input '{first.path}': {str(exc).splitlines()[0]}") from None
    return map_columns(names, model, f"'{first.path}'")


def map_columns(names: list[str], model: Model, where: str) -> dict[str, Any]:
    """``{"positional": [col], "keywords": {param: col}}``: columns named after the forward's
    inputs, or a single column for a one-input model; ``where`` names the table in errors."""
    params = forward_parameters(model)
    matched = {p: p for p, _ in params if p in names}
    if matched:
        missing = [p for p, required in params if required and p not in names]
        if missing:
            raise UserError(
                f"{where} has no column '{missing[0]}' (an input of the model's forward); its columns: {', '.join(names)}"
            )
        return {"positional": [], "keywords": matched}
    if len(names) == 1:
        return {"positional": names, "keywords": {}}
    wanted = ", ".join(p for p, _ in params) or "unknown"
    raise UserError(
        f"no column of {where} is named after an input of the model's forward ({wanted}); its columns: {', '.join(names)}"
    )


class _Ragged(Exception):
    pass


def _to_numpy(array: Any) -> np.ndarray:
    """An Arrow array of numbers or lists of numbers as one array (rows, ...); lists of unequal
    length raise :class:`_Ragged`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if isinstance(kind, pa.ExtensionType) and hasattr(kind, "shape"):  # a fixed-shape tensor column
        flat = _to_numpy(array.storage)
        return flat.reshape(len(array), *kind.shape)
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = np.asarray(pc.list_value_length(array).fill_null(-1).to_numpy(zero_copy_only=False))
        if len(lengths) and (lengths != lengths[0]).any():
            raise _Ragged
        inner = _to_numpy(array.flatten())
        return inner.reshape(len(array), int(lengths[0]) if len(lengths) else 0, *inner.shape[1:])
    if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        if array.null_count:  # null rows are bad samples already; filled so the others keep their dtype
            array = array.fill_null(pa.scalar(False if pa.types.is_boolean(kind) else 0, type=kind))
        return np.asarray(array.to_numpy(zero_copy_only=False))
    raise BadInput(f"a column holds {kind}; samebits predict reads numbers and lists of numbers")


def _null_rows(array: Any) -> np.ndarray:
    """Which rows are null or hold a null at any depth (a null inside a list is no number)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    kind = array.type
    if isinstance(kind, pa.ExtensionType):
        return np.asarray(mask | _null_rows(array.storage), dtype=bool)
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values = array.flatten()  # the values of the non-null lists, in row order
        inner = _null_rows(values)
        if inner.any():
            lengths = np.asarray(pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False))
            owner = np.repeat(np.arange(len(array)), lengths)
            mask |= np.bincount(owner[inner], minlength=len(array)) > 0
    return mask


def as_tensor(values: np.ndarray) -> torch.Tensor:
    """A column's values as a tensor: floats float32, integers int64, booleans as they are."""
    if values.dtype.kind == "f":
        values = values.astype(np.float32, copy=False)
    elif values.dtype.kind in "iu":
        values = values.astype(np.int64, copy=False)
    elif values.dtype.kind != "b":
        raise BadInput(f"a column holds {values.dtype}; samebits predict reads numbers and lists of numbers")
    return torch.from_numpy(np.ascontiguousarray(values))


class ParquetSource(Source):
    def __init__(self, file: InputFile, columns: dict[str, Any]) -> None:
        self.file = file
        self._file = _pyarrow().ParquetFile(file.path)
        names = set(self._file.schema_arrow.names)
        self.inputs = [(f"input {i}", c) for i, c in enumerate(columns["positional"])] + [
            (f"input {p}", c) for p, c in columns["keywords"].items()
        ]
        missing = [c for _, c in self.inputs if c not in names]
        if missing:
            raise BadInput(f"has no column '{missing[0]}'; its columns: {', '.join(sorted(names))}")
        self._positional = len(columns["positional"])
        meta = self._file.metadata
        self._starts = [0]
        for g in range(meta.num_row_groups):
            self._starts.append(self._starts[-1] + meta.row_group(g).num_rows)
        self.rows = meta.num_rows

    def read(self, a: int, b: int, reference: Shapes | None) -> Piece:
        first = bisect.bisect_right(self._starts, a) - 1
        last = bisect.bisect_left(self._starts, b) - 1
        table = self._file.read_row_groups(
            list(range(first, max(first, last) + 1)), columns=[c for _, c in self.inputs]
        )
        table = table.slice(a - self._starts[first], b - a)
        wanted = {name: shape for name, _, shape in reference or []}
        bad: dict[int, str] = {}
        columns: dict[str, np.ndarray | list[Any]] = {}
        for name, col in self.inputs:
            array = table.column(col).combine_chunks()
            for null in np.flatnonzero(_null_rows(array)).tolist():
                bad.setdefault(a + null, f"column '{col}' is null or holds a null")
            expected = wanted.get(name)
            try:
                whole = _to_numpy(array)
                if expected is not None and whole.shape[1:] != expected:
                    reason = f"column '{col}' has shape {list(whole.shape[1:])}; the first sample's is {list(expected)}"
                    bad.update({a + r: reason for r in range(b - a) if a + r not in bad})
                columns[name] = whole
            except _Ragged:  # lists of unequal length: row by row
                rows = [None if v is None else np.asarray(v) for v in array.to_pylist()]
                if expected is None:
                    expected = next((v.shape for v in rows if v is not None), ())
                for r, v in enumerate(rows):
                    if v is not None and v.shape != expected and a + r not in bad:
                        bad[a + r] = f"column '{col}' has shape {list(v.shape)}; the first sample's is {list(expected)}"
                columns[name] = rows
        good = [r for r in range(b - a) if a + r not in bad]
        if not good:
            return Piece(None, sorted(bad.items()))
        tensors = []
        for name, _ in self.inputs:
            values = columns[name]
            if isinstance(values, list):
                picked = np.stack([values[r] for r in good])
            else:
                picked = values[good] if len(good) < b - a else values
            tensors.append(as_tensor(picked))
        args = tuple(tensors[: self._positional])
        kwargs = {
            name.removeprefix("input "): t for (name, _), t in list(zip(self.inputs, tensors))[self._positional :]
        }
        batch = ModelInputs(args, kwargs)
        if reference is not None and row_shapes(batch) != reference:
            reason = f"its samples are {describe(row_shapes(batch))}; the first sample is {describe(reference)}"
            return Piece(None, [(a + r, reason) for r in range(b - a)])
        return Piece(batch, sorted(bad.items()))
