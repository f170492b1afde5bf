"""Input files for ``samebits predict``, read as data, a range of samples at a time (never all
in memory). Tensor files hold a batch (dim 0 = samples): ``.npy`` (no pickles, memory-mapped),
``.safetensors`` (one tensor: the positional input; several: keyword inputs by name), ``.pt``
(``weights_only=True``: a tensor, or a dict of tensors as keyword inputs). A Parquet file is one
sample per row (offline/parquet.py), an image file one sample (offline/images.py). A folder is
its files in sorted name order; one run reads one kind of file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from samebits.errors import UserError
from samebits.files import xxh3_file
from samebits.models.inputs import ModelInputs

TENSOR_SUFFIXES = (".npy", ".safetensors", ".pt", ".pth")
PARQUET_SUFFIXES = (".parquet",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
KINDS = {
    **dict.fromkeys(TENSOR_SUFFIXES, "tensors"),
    **dict.fromkeys(PARQUET_SUFFIXES, "parquet"),
    **dict.fromkeys(IMAGE_SUFFIXES, "images"),
}
Shapes = list[tuple[str, str, tuple[int, ...]]]  # (input name, dtype, shape of one sample)


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: Path
    size: int
    xxh3_128: str  # change detection for --resume and verify: an edited input is noticed

    @property
    def kind(self) -> str:
        return KINDS[self.path.suffix.lower()]

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "size": self.size, "xxh3_128": self.xxh3_128}

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> InputFile:
        """An input as a manifest (or a worker's job) records it."""
        return cls(Path(entry["path"]), entry["size"], entry["xxh3_128"])


def input_files(paths: list[str]) -> list[InputFile]:
    """Every input file, in order: the given files, and each folder's files sorted by name; all of
    one kind (tensor files, Parquet files or images)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            try:
                inside = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in KINDS)
            except OSError as exc:
                raise UserError(f"cannot read input folder '{p}': {exc.strerror or exc}") from None
            if not inside:
                raise UserError(f"'{p}' holds no input files ({', '.join(KINDS)})")
            found += inside
        elif p.is_file():
            if p.suffix.lower() not in KINDS:
                raise UserError(f"'{p}' is not an input file samebits reads ({', '.join(KINDS)})")
            found.append(p)
        else:
            raise UserError(f"input '{p}' does not exist")
    kinds = sorted({KINDS[f.suffix.lower()] for f in found})
    if len(kinds) > 1:
        raise UserError(f"the inputs mix {' and '.join(kinds)}; one run reads one kind of input file")
    return [_described(f) for f in found]


def _described(path: Path) -> InputFile:
    try:
        return InputFile(path.resolve(), path.stat().st_size, xxh3_file(path))
    except OSError as exc:
        raise UserError(f"cannot read input '{path}': {exc.strerror or exc}") from None


class BadInput(Exception):
    """A file, or some of its rows, that cannot be read as samples."""


@dataclasses.dataclass
class Piece:
    """Rows ``[a, b)`` of one source: the good rows' inputs (in order) and the bad rows."""

    inputs: ModelInputs | None
    bad: list[tuple[int, str]]  # (row in the file, reason)


class Source:
    """One input file: its sample count (known when opened) and a way to read a range of rows."""

    file: InputFile
    rows: int

    def read(self, a: int, b: int, reference: Shapes | None) -> Piece:
        raise NotImplementedError

    def close(self) -> None:
        """Drop what was cached to read this file."""


def row_shapes(batch: ModelInputs) -> Shapes:
    named = [(f"input {i}", t) for i, t in enumerate(batch.args)] + [(f"input {k}", t) for k, t in batch.kwargs.items()]
    return [(name, str(t.dtype).removeprefix("torch."), tuple(t.shape[1:])) for name, t in named]


def describe(shapes: Shapes) -> str:
    return ", ".join(f"{n} {d} {list(s)}" for n, d, s in shapes)


def _rows_in(shapes: list[Any]) -> int:
    sizes = {int(s[0]) for s in shapes if len(s) > 0}
    if len(sizes) != 1 or any(len(s) == 0 for s in shapes):
        raise BadInput("every tensor must have the same number of samples along dim 0")
    return sizes.pop()


class TensorFile(Source):
    """``.npy``, ``.safetensors`` or ``.pt``: a batch along dim 0."""

    def __init__(self, file: InputFile) -> None:
        self.file = file
        self._held: dict[str, torch.Tensor] | None = None
        path, suffix = file.path, file.path.suffix.lower()
        if suffix == ".npy":
            with open(path, "rb") as f:
                if f.read(6) != b"\x93NUMPY":
                    raise BadInput("not a .npy array file")
            self.rows = _rows_in([np.load(path, mmap_mode="r", allow_pickle=False).shape])
        elif suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                self._names = list(f.keys())
                self.rows = _rows_in([f.get_slice(k).get_shape() for k in self._names]) if self._names else 0
            if not self._names:
                raise BadInput("holds no tensors")
        else:
            self.rows = _rows_in([t.shape for t in self._load().values()])

    def _load(self) -> dict[str, torch.Tensor]:
        if self._held is None:
            data: Any = torch.load(self.file.path, map_location="cpu", weights_only=True)
            if isinstance(data, torch.Tensor):
                data = {"": data}
            if not (isinstance(data, dict) and data and all(isinstance(v, torch.Tensor) for v in data.values())):
                raise BadInput(f"holds a {type(data).__name__}; it must hold a tensor or a dict of tensors")
            self._held = {str(k): v for k, v in data.items()}
        return self._held

    def read(self, a: int, b: int, reference: Shapes | None) -> Piece:
        path, suffix = self.file.path, self.file.path.suffix.lower()
        if suffix == ".npy":
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            batch = ModelInputs((torch.from_numpy(np.array(array[a:b])),))
        elif suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                tensors = {k: f.get_slice(k)[a:b] for k in self._names}
            batch = ModelInputs((next(iter(tensors.values())),)) if len(tensors) == 1 else ModelInputs((), tensors)
        else:
            held = self._load()
            batch = (
                ModelInputs((held[""][a:b],))
                if list(held) == [""]
                else ModelInputs((), {k: v[a:b] for k, v in held.items()})
            )
        shapes = row_shapes(batch)
        if reference is not None and shapes != reference:
            reason = f"its samples are {describe(shapes)}; the first file's are {describe(reference)}"
            return Piece(None, [(r, reason) for r in range(a, b)])
        return Piece(batch, [])

    def close(self) -> None:
        self._held = None


@dataclasses.dataclass
class Skipped:
    """A sample (or a whole file, ``sample`` None) left out under ``--skip-bad``."""

    input: str
    row: int | None
    reason: str
    sample: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
