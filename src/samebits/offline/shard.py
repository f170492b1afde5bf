"""One shard of ``samebits predict``: samples read from the dataset, run through the runner in
chunks, written atomically as one safetensors file, and the manifest entry that says what it
holds (a digest of the file and one per sample). The kernel both the main process, its worker
processes and Ray's actors run; :mod:`samebits.offline.run` plans and records the run."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from samebits.errors import UserError, first_line
from samebits.files import atomic_write, xxh3_file
from samebits.measure.batching import batch_size_of, join_outputs, take_rows
from samebits.models.inputs import Model, ModelInputs
from samebits.offline.dataset import Dataset
from samebits.offline.images import ImagePrep
from samebits.offline.sources import InputFile
from samebits.runtime.plan import Runner
from samebits.tensors.digest import tensor_bytes
from samebits.tensors.tree import flatten


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.safetensors"


def sample_digests(leaves: dict[str, Any], rows: int) -> list[str]:
    """One xxh3-128 per sample over every output path's row (exact bits, NaNs canonical), seeded
    with the paths' names, dtypes and shapes: one C call per sample, each tensor's bytes read once."""
    import xxhash

    heads, parts = [], []
    for path in sorted(leaves):
        t = leaves[path]
        heads.append(f"{path}|{t.dtype}|{tuple(t.shape[1:])}|")
        data = np.frombuffer(tensor_bytes(t.contiguous()), dtype=np.uint8)
        parts.append(data.reshape(rows, len(data) // max(rows, 1)))
    seed = xxhash.xxh3_64_intdigest("".join(heads).encode())
    if len(parts) == 1:
        digest = xxhash.xxh3_128_hexdigest
        return [digest(row.data, seed) for row in parts[0]]
    out = []  # the rows' bytes one after the other (fixed widths), streamed: no joined copy
    for row in zip(*parts):
        h = xxhash.xxh3_128(seed=seed)
        for piece in row:
            h.update(piece.data)
        out.append(h.hexdigest())
    return out


def open_dataset(
    files: list[InputFile], model: Model, *, image: ImagePrep | None = None, skip_bad: bool = False
) -> Dataset:
    """The run's samples; Parquet columns are mapped to ``model``'s inputs by name."""
    options: dict[str, Any] = {"image": image or ImagePrep()}
    if files and files[0].kind == "parquet":
        from samebits.offline.parquet import column_map

        options["columns"] = column_map(files[0], model)
    return Dataset(files, options, skip_bad=skip_bad)


def example_of(dataset: Dataset) -> ModelInputs:
    """What the Predictor calibrates on: the first 8 good samples (the data's shapes are what
    runs, whatever the spec's own example)."""
    return dataset.first_rows(8)


def shard_outputs(
    predictor: Runner, dataset: Dataset, start: int, stop: int, batch_size: int
) -> tuple[dict[str, Any], int, list[Any]]:
    """The outputs ``{path: tensor}`` of samples ``[start, stop)``, their row count, the skipped."""
    batch, skipped = dataset.read(start, stop)
    rows = (batch_size_of(batch) or 0) if batch is not None else 0
    tensors = run_shard(predictor, batch, rows, batch_size, start) if batch is not None and rows else {}
    return tensors, rows, skipped


def compute_shard(
    predictor: Runner, dataset: Dataset, index: int, shard_size: int, batch_size: int, out: Path
) -> dict[str, Any]:
    """Read, run and write shard ``index`` (atomically); its manifest entry."""
    from safetensors.torch import save_file

    start, stop = index * shard_size, min((index + 1) * shard_size, dataset.total)
    tensors, rows, skipped = shard_outputs(predictor, dataset, start, stop, batch_size)
    path = out / shard_name(index)
    try:
        atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))
    except OSError as exc:
        raise UserError(f"cannot write '{path}': {exc.strerror or exc}") from None
    entry = {
        "index": index,
        "start": start,
        "stop": stop,
        "samples": rows,
        "file": path.name,
        "xxh3_128": xxh3_file(path),
        "sample_xxh3_128": sample_digests(tensors, rows),
        "status": "complete",
    }
    if skipped:
        entry["skipped"] = [s.to_dict() for s in skipped]
    return entry


def run_shard(predictor: Runner, shard: ModelInputs, rows: int, batch_size: int, start: int) -> dict[str, Any]:
    """One shard's outputs ``{path: tensor}``, run in chunks of ``batch_size``."""
    outputs, sizes = [], []
    with getattr(predictor, "running", contextlib.nullcontext)():  # a Predictor: the switches set once
        for a in range(0, rows, batch_size):
            b = min(a + batch_size, rows)
            try:
                outputs.append(predictor.predict(take_rows(shard, a, b)))
            except UserError:
                raise
            except Exception as exc:
                raise UserError(
                    f"the model's forward raised on rows {a}..{b - 1} of the shard from sample {start}: "
                    f"{first_line(exc, with_type=True)}"
                ) from None
            sizes.append(b - a)
    output = join_outputs(outputs, sizes) if len(outputs) > 1 else outputs[0]
    leaves = flatten(output)
    bad = [p or "<output>" for p, t in leaves.items() if not hasattr(t, "shape") or not t.dim() or t.shape[0] != rows]
    if bad:
        raise UserError(f"output {bad[0]} is not a tensor with one row per sample; samebits predict stores tensors")
    return {p or "output": t.contiguous() for p, t in leaves.items()}
