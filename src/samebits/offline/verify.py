"""``samebits verify OUT_DIR``: recompute a sample of a predict run's shards on this machine and
compare every sample's output digest with the manifest; say which shard and sample differ, and
the fingerprint changes that likely caused it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.limits import batch_rows
from samebits.files import BadJson, read_json, xxh3_file
from samebits.models.spec import is_data_only_spec
from samebits.models.target import ModelOrSpec, as_loaded
from samebits.offline.images import ImagePrep
from samebits.offline.run import MANIFEST, SCHEMA_VERSION, is_entry
from samebits.offline.shard import example_of, open_dataset, sample_digests, shard_name, shard_outputs
from samebits.offline.sources import InputFile, input_files
from samebits.exit_codes import exit_code


@dataclasses.dataclass
class ShardCheck:
    index: int
    samples: int
    first_difference: int | None  # the first sample (global index) whose digest differs


@dataclasses.dataclass
class PredictionsReport:
    out_dir: str
    checked: list[ShardCheck]
    changes: list[dict[str, Any]]  # bit-relevant fingerprint fields that differ from the run's
    bad_files: list[str] = dataclasses.field(default_factory=list)  # shard files missing or not as written

    @property
    def identical(self) -> bool:
        return all(c.first_difference is None for c in self.checked) and not self.bad_files

    @property
    def exit_code(self) -> int:
        return exit_code(found=not self.identical)


def is_predictions(path: str | Path) -> bool:
    """Whether ``path`` is a folder with a ``manifest.json`` (a predict OUT_DIR, or an edited one)."""
    return (Path(path) / MANIFEST).is_file()


def _manifest(out: Path) -> dict[str, Any]:
    try:
        data = read_json(out / MANIFEST)
    except BadJson as exc:
        raise UserError(f"'{out / MANIFEST}' is unreadable (it is {exc})") from None
    if not isinstance(data, dict) or data.get("kind") != "predict":
        raise UserError(f"'{out / MANIFEST}' is not a samebits predict manifest")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"cannot verify '{out}': its manifest is schema {data.get('schema_version')}; this samebits reads {SCHEMA_VERSION}"
        )
    shapes = {
        "inputs": list,
        "shards": list,
        "plan": dict,
        "threads": dict,
        "shard_size": int,
        "batch_size": int,
        "skip_bad": bool,
    }
    wrong = [k for k, t in shapes.items() if not isinstance(data.get(k), t)]
    inputs_ok = all(isinstance(f, dict) and {"path", "size", "xxh3_128"} <= set(f) for f in data.get("inputs") or [])
    threads_ok = {"build", "per_worker"} <= set(data.get("threads") or {}) and "backend" in (data.get("plan") or {})
    prep_ok = _preprocessing_ok(data.get("preprocessing"))
    if wrong or not inputs_ok or not threads_ok or not prep_ok:
        what = wrong[0] if wrong else "inputs" if not inputs_ok else "threads" if not threads_ok else "preprocessing"
        raise UserError(f"'{out / MANIFEST}' is incomplete or edited (its '{what}' is missing or malformed)")
    for key in ("batch_size", "shard_size"):
        batch_rows(data[key], f"the manifest's {key}")
    return data


def _preprocessing_ok(prep: Any) -> bool:
    """None, or a dict: Parquet's columns, or an image resize (two sizes) with a mean and std per
    channel (their ranges are ImagePrep's to check)."""
    if prep is None or (isinstance(prep, dict) and "resize" not in prep):
        return True
    if not isinstance(prep, dict):
        return False
    numbers = lambda v, n: (
        isinstance(v, list)
        and len(v) == n
        and all(  # noqa: E731
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v
        )
    )
    return numbers(prep["resize"], 2) and numbers(prep.get("mean"), 3) and numbers(prep.get("std"), 3)


def _file_problems(out: Path, entries: list[dict[str, Any]]) -> list[str]:
    """Each complete shard whose file is missing or not the bytes the run wrote."""
    problems = []
    for e in entries:
        path = out / shard_name(e["index"])
        if not path.is_file():
            problems.append(f"shard {e['index']}: its file {path.name} is missing")
        elif xxh3_file(path) != e["xxh3_128"]:
            problems.append(
                f"shard {e['index']}: its file {path.name} is not the one the run wrote (its digest differs)"
            )
    return problems


def pick(n: int, k: int) -> list[int]:
    """``k`` shard indices spread over ``n``: the first, the last and evenly between."""
    if k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})


def verify_predictions(
    out_dir: str | Path, model_or_spec: ModelOrSpec | None = None, *, shards: int = 3
) -> PredictionsReport:
    """Check every complete shard's file digest, recompute ``shards`` of them spread over the
    run and compare per-sample digests."""
    if shards < 1:
        raise UserError("--shards must be >= 1")
    out = Path(out_dir)
    return _verify(out, _manifest(out), model_or_spec, shards)


def _verify(out: Path, manifest: dict[str, Any], model_or_spec: ModelOrSpec | None, shards: int) -> PredictionsReport:
    from samebits.fingerprint import Fingerprint, bit_relevant_changes
    from samebits.measure.threads import num_threads
    from samebits.runtime.predictor import Predictor

    if model_or_spec is None:
        stored = manifest.get("model")
        if not isinstance(stored, str) or not is_data_only_spec(stored):
            raise UserError(
                f"'{out}' was made by the MODEL {str(stored)[:80]!r}, which is code; pass it: samebits verify OUT_DIR MODEL"
            )
        model_or_spec = stored
    recorded = [InputFile.from_dict(f) for f in manifest["inputs"]]
    try:
        now = input_files([str(f.path) for f in recorded])
    except UserError as exc:
        raise UserError(f"cannot verify '{out}': {exc}") from None
    changed = [a.path for a, b in zip(recorded, now) if a.xxh3_128 != b.xxh3_128]
    if changed:
        raise UserError(f"cannot verify '{out}': input '{changed[0]}' changed since the run")
    done = {s["index"]: s for s in manifest["shards"] if is_entry(s)}
    bad_files = _file_problems(out, [done[i] for i in sorted(done)])
    wanted = [sorted(done)[i] for i in pick(len(done), shards)] if done else []
    loaded = as_loaded(model_or_spec)
    prep = manifest.get("preprocessing") or {}
    image = ImagePrep(tuple(prep["resize"]), tuple(prep["mean"]), tuple(prep["std"])) if "resize" in prep else None
    dataset = open_dataset(now, loaded.model, image=image, skip_bad=manifest["skip_bad"])
    checked = []
    threads = manifest["threads"]
    with num_threads(threads["build"]):  # calibrated and run as the run was, not at this shell's count
        predictor = Predictor(
            loaded,
            device=str(manifest.get("device") or "cpu"),  # where the run ran (check_device says if not here)
            backend=manifest["plan"]["backend"],
            example_inputs=example_of(dataset),
            max_batch_size=batch_rows(manifest.get("max_batch_size", 256), "the manifest's max_batch_size"),
        )
        changes, _ = bit_relevant_changes(
            manifest.get("fingerprint", {}), Fingerprint.for_device(str(manifest.get("device") or "cpu"))
        )
    with num_threads(threads["per_worker"]), predictor:
        plan = predictor.plan.describe()
        for index in wanted:
            entry = done[index]
            tensors, rows, _ = shard_outputs(predictor, dataset, entry["start"], entry["stop"], manifest["batch_size"])
            got = sample_digests(tensors, rows)
            first = next((i for i, (a, b) in enumerate(zip(got, entry["sample_xxh3_128"])) if a != b), None)
            if first is None and len(got) != len(entry["sample_xxh3_128"]):
                first = min(len(got), len(entry["sample_xxh3_128"]))
            checked.append(ShardCheck(index, entry["samples"], None if first is None else entry["start"] + first))
    found = [c.to_dict() for c in changes if c.affects_bits]
    if plan != manifest["plan"]:
        found.append(
            {
                "field": "plan",
                "old": manifest["plan"],
                "new": plan,
                "affects_bits": True,
                "note": "other verified batch sizes",
            }
        )
    return PredictionsReport(str(out), checked, found, bad_files)
