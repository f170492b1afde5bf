"""Input files for ``samebits predict``, read as data and streamed one file at a time: a file
holds a batch (dim 0 = samples); a folder is its files in sorted name order, samples
concatenated. ``.npy`` (no pickles), ``.safetensors`` (one tensor: the positional input; several:
keyword inputs by name), ``.pt`` (loaded with ``weights_only=True``: a tensor, or a dict of
tensors as keyword inputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from samebits.errors import UserError, first_line
from samebits.files import sha256_file
from samebits.models.inputs import ModelInputs

SUFFIXES = (".npy", ".safetensors", ".pt", ".pth")


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: Path
    size: int
    sha256: str

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "size": self.size, "sha256": self.sha256}


def input_files(paths: list[str]) -> list[InputFile]:
    """Every input file, in order: the given files, and each folder's files sorted by name."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            inside = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in SUFFIXES)
            if not inside:
                raise UserError(f"'{p}' holds no input files ({', '.join(SUFFIXES)})")
            found += inside
        elif p.is_file():
            if p.suffix not in SUFFIXES:
                raise UserError(f"'{p}' is not an input file samebits reads ({', '.join(SUFFIXES)})")
            found.append(p)
        else:
            raise UserError(f"input '{p}' does not exist")
    return [InputFile(f.resolve(), f.stat().st_size, sha256_file(f)) for f in found]


def read_batch(path: Path) -> ModelInputs:
    """One file's samples as a batch; a file that cannot be read is one line naming it."""
    try:
        if path.suffix == ".npy":
            with open(path, "rb") as f:
                if f.read(6) != b"\x93NUMPY":
                    raise ValueError("not a .npy array file")
            return ModelInputs((torch.from_numpy(np.load(path, allow_pickle=False)),))
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(path))
            return ModelInputs((next(iter(tensors.values())),)) if len(tensors) == 1 else ModelInputs((), tensors)
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UserError(f"cannot read input '{path}': {first_line(exc)}") from None
    if isinstance(data, torch.Tensor):
        return ModelInputs((data,))
    if isinstance(data, dict) and data and all(isinstance(v, torch.Tensor) for v in data.values()):
        return ModelInputs((), {str(k): v for k, v in data.items()})
    raise UserError(f"input '{path}' holds a {type(data).__name__}; it must hold a tensor or a dict of tensors")


def rows_in(batch: ModelInputs, path: Path) -> int:
    sizes = {t.shape[0] for t in [*batch.args, *batch.kwargs.values()] if t.dim() > 0}
    if len(sizes) != 1:
        raise UserError(f"input '{path}': every tensor must have the same number of samples along dim 0")
    return sizes.pop()


def _row_shapes(batch: ModelInputs) -> list[tuple[str, torch.dtype, tuple[int, ...]]]:
    named = [(f"input {i}", t) for i, t in enumerate(batch.args)] + [(f"input {k}", t) for k, t in batch.kwargs.items()]
    return [(name, t.dtype, tuple(t.shape[1:])) for name, t in named]


def batches(files: list[InputFile]) -> Iterator[tuple[InputFile, ModelInputs, int]]:
    """(file, its batch, its row count), one file at a time; every file's samples must have the
    names, dtypes and shapes of the first file's."""
    first: list[tuple[str, torch.dtype, tuple[int, ...]]] | None = None
    for f in files:
        batch = read_batch(f.path)
        rows = rows_in(batch, f.path)
        shapes = _row_shapes(batch)
        if first is None:
            first = shapes
        elif shapes != first:
            want = ", ".join(f"{n} {d} {list(s)}" for n, d, s in first)
            got = ", ".join(f"{n} {d} {list(s)}" for n, d, s in shapes)
            raise UserError(f"input '{f.path}': its samples are {got}; the first file's are {want}")
        yield f, batch, rows
