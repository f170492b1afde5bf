"""``samebits predict``: offline batch inference over input files into shards of outputs.

Samples are streamed one input file at a time and cut into shards of ``shard_size`` samples;
each shard runs through one :class:`~samebits.runtime.Predictor` in chunks of ``batch_size``
and is written atomically as ``shard-NNNNNN.safetensors``. ``manifest.json`` lists what the run
was (model weights, bit-relevant fingerprint, plan, shard size, input files) and, for each
complete shard only, its samples, file digest and per-sample output digests. A run stopped at
any point and resumed (``resume=True``) skips the complete shards whose files still have their
digest and redoes the rest: the same bytes as an uninterrupted run. Per-sample outputs do not
depend on the batch size or the shard size (the Predictor runs only verified sizes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.files import atomic_write, sha256_file
from samebits.measure.batching import batch_size_of, concat_batches, join_outputs, take_rows
from samebits.models.inputs import ModelInputs
from samebits.models.target import as_loaded
from samebits.offline.sources import InputFile, batches, input_files
from samebits.tensors.digest import digest
from samebits.tensors.tree import flatten

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
DEFAULT_SHARD = 1000
DEFAULT_BATCH = 64
# What must be equal for a resume (and a verify) to be the same job.
COMPARED = ("schema_version", "weights_sha256", "fingerprint_sha256", "plan", "shard_size", "inputs")


@dataclasses.dataclass
class PredictReport:
    out_dir: Path
    samples: int
    shards: int
    computed: int  # shards computed in this run (the others were complete already)
    seconds: float


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.safetensors"


def sample_digests(leaves: dict[str, Any], rows: int) -> list[str]:
    """One sha256 per sample over every output path's row (names, dtypes, shapes, exact bits)."""
    out = []
    for i in range(rows):
        h = hashlib.sha256()
        for path in sorted(leaves):
            h.update(f"{path}={digest(leaves[path][i])};".encode())
        out.append(h.hexdigest())
    return out


def shards_of(files: list[InputFile], size: int) -> Iterator[tuple[int, int, ModelInputs]]:
    """(index, first sample, inputs) of each shard of ``size`` samples, streaming the files."""
    pending: list[ModelInputs] = []
    held, start, index = 0, 0, 0
    for _, batch, rows in batches(files):
        pending.append(batch)
        held += rows
        while held >= size:
            joined = concat_batches(pending) if len(pending) > 1 else pending[0]
            yield index, start, take_rows(joined, 0, size)
            rest = held - size
            pending = [take_rows(joined, size, held)] if rest else []
            held, start, index = rest, start + size, index + 1
    if held:
        yield index, start, concat_batches(pending) if len(pending) > 1 else pending[0]


def example_of(loaded: Any, files: list[InputFile]) -> ModelInputs:
    """What the Predictor calibrates on: the spec's example, else the first file's first 8 rows."""
    if loaded.example_inputs is not None:
        return loaded.example_inputs
    from samebits.offline.sources import read_batch, rows_in

    first = read_batch(files[0].path)
    return take_rows(first, 0, min(8, rows_in(first, files[0].path)))


def plan_of(predictor: Any) -> dict[str, Any]:
    return {
        "backend": predictor.backend,
        "invariance": predictor.invariance.scheme,
        "verified_batch_sizes": list(predictor.invariance.sizes),
    }


def _header(predictor: Any, spec: str, batch_size: int, shard_size: int, files: list[InputFile]) -> dict[str, Any]:
    from samebits.fingerprint.diff import bit_relevant_digest
    from samebits.runtime.cache import weights_digest

    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "predict",
        "model": spec,
        "weights_sha256": weights_digest(predictor.model),
        "fingerprint_sha256": bit_relevant_digest(predictor.fingerprint),
        "fingerprint": predictor.fingerprint,  # in full, for verify to say what changed
        "plan": plan_of(predictor),
        "batch_size": batch_size,  # recorded, not compared: outputs do not depend on it
        "shard_size": shard_size,
        "inputs": [f.to_dict() for f in files],
    }


def _write_manifest(out: Path, header: dict[str, Any], shards: dict[int, dict[str, Any]]) -> None:
    data = {**header, "shards": [shards[i] for i in sorted(shards)]}
    atomic_write(out / MANIFEST, lambda tmp: tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n"))


def _resumable(out: Path, header: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The complete shards of an earlier run of the same job; a different job is one line."""
    try:
        old = json.loads((out / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot resume: '{out / MANIFEST}' is unreadable ({exc})") from None
    if not isinstance(old, dict) or old.get("kind") != "predict":
        raise UserError(f"cannot resume: '{out / MANIFEST}' is not a samebits predict manifest")
    for key in COMPARED:
        if old.get(key) != header[key]:
            raise UserError(
                f"cannot resume into '{out}': the {key.replace('_', ' ')} differs from the earlier run's; use another OUT_DIR"
            )
    done = {}
    for entry in old.get("shards", []):
        if isinstance(entry, dict) and entry.get("status") == "complete" and isinstance(entry.get("index"), int):
            done[entry["index"]] = entry
    return done


def predict(
    model_or_spec: Any,
    inputs: list[str],
    out_dir: str | Path,
    *,
    batch_size: int = DEFAULT_BATCH,
    backend: str = "eager",
    shard_size: int = DEFAULT_SHARD,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
) -> PredictReport:
    """Run ``model_or_spec`` over the samples in ``inputs`` (files or folders) into ``out_dir``."""
    from samebits.runtime.predictor import Predictor

    started = time.monotonic()
    if batch_size < 1 or shard_size < 1:
        raise UserError("batch size (--batch-size) and shard size (--shard-size) must be >= 1")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"'{out}' is a file; OUT_DIR must be a folder")
    has_manifest = (out / MANIFEST).is_file()
    if out.is_dir() and any(out.iterdir()) and not (resume and has_manifest):
        raise UserError(
            f"'{out}' exists and is not empty; pass --resume to continue a run there, or choose another OUT_DIR"
            if has_manifest
            else f"'{out}' exists, is not empty and holds no samebits manifest; choose another OUT_DIR"
        )
    files = input_files(inputs)
    loaded = as_loaded(model_or_spec)
    example = example_of(loaded, files)
    out.mkdir(parents=True, exist_ok=True)
    done_samples = 0
    # The plan (verified sizes) must not depend on --batch-size, or neither would the bits: the
    # Predictor keeps its own maximum, and batch_size only cuts the calls to it.
    with Predictor(loaded, backend=backend, example_inputs=example) as predictor:
        header = _header(predictor, loaded.spec, batch_size, shard_size, files)
        complete = _resumable(out, header) if resume and has_manifest else {}
        shards: dict[int, dict[str, Any]] = {}
        computed = 0
        for index, start, shard in shards_of(files, shard_size):
            rows = _rows(shard)
            path = out / shard_name(index)
            entry = complete.get(index)
            if entry and entry.get("start") == start and path.is_file() and sha256_file(path) == entry.get("sha256"):
                shards[index] = entry  # complete, and its file unchanged
            else:
                shards[index] = _compute(predictor, shard, rows, batch_size, path, index, start)
                computed += 1
                _write_manifest(out, header, shards)
            done_samples += rows
            if progress is not None:
                progress(done_samples)
        _write_manifest(out, header, shards)
    return PredictReport(out, done_samples, len(shards), computed, time.monotonic() - started)


def _rows(batch: ModelInputs) -> int:
    n = batch_size_of(batch)
    if n is None:
        raise UserError("the inputs have no batch dimension 0")
    return n


def _compute(
    predictor: Any, shard: ModelInputs, rows: int, batch_size: int, path: Path, index: int, start: int
) -> dict[str, Any]:
    """Run one shard, write its file atomically, describe it."""
    from safetensors.torch import save_file

    tensors = run_shard(predictor, shard, rows, batch_size, start)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))
    return {
        "index": index,
        "start": start,
        "samples": rows,
        "file": path.name,
        "sha256": sha256_file(path),
        "sample_sha256": sample_digests(tensors, rows),
        "status": "complete",
    }


def run_shard(predictor: Any, shard: ModelInputs, rows: int, batch_size: int, start: int) -> dict[str, Any]:
    """One shard's outputs ``{path: tensor}``, run in chunks of ``batch_size``."""
    from samebits.errors import first_line

    outputs, sizes = [], []
    for a in range(0, rows, batch_size):
        b = min(a + batch_size, rows)
        try:
            outputs.append(predictor.predict(take_rows(shard, a, b)))
        except UserError:
            raise
        except Exception as exc:
            raise UserError(
                f"the model's forward raised on samples {start + a}..{start + b - 1}: {first_line(exc, with_type=True)}"
            ) from None
        sizes.append(b - a)
    output = join_outputs(outputs, sizes) if len(outputs) > 1 else outputs[0]
    leaves = flatten(output)
    bad = [p or "<output>" for p, t in leaves.items() if not hasattr(t, "shape") or not t.dim() or t.shape[0] != rows]
    if bad:
        raise UserError(f"output {bad[0]} is not a tensor with one row per sample; samebits predict stores tensors")
    return {p or "output": t.contiguous() for p, t in leaves.items()}
