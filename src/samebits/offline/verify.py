"""``samebits verify OUT_DIR``: recompute a sample of a predict run's shards on this machine and
compare every sample's output digest with the manifest; say which shard and sample differ, and
the fingerprint changes that likely caused it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.models.spec import is_data_only_spec
from samebits.models.target import as_loaded
from samebits.offline.images import ImagePrep
from samebits.offline.run import (
    MANIFEST,
    SCHEMA_VERSION,
    shard_outputs,
    example_of,
    open_dataset,
    plan_of,
    sample_digests,
)
from samebits.offline.sources import InputFile, input_files


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

    @property
    def identical(self) -> bool:
        return all(c.first_difference is None for c in self.checked)

    @property
    def exit_code(self) -> int:
        return 0 if self.identical else 1


def is_predictions(path: str | Path) -> bool:
    p = Path(path) / MANIFEST
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text()).get("kind") == "predict"
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


def pick(n: int, k: int) -> list[int]:
    """``k`` shard indices spread over ``n``: the first, the last and evenly between."""
    if k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})


def verify_predictions(out_dir: str | Path, model_or_spec: Any = None, *, shards: int = 3) -> PredictionsReport:
    """Recompute ``shards`` of the complete shards in ``out_dir`` and compare per-sample digests."""
    from samebits.fingerprint import Fingerprint, bit_relevant_changes
    from samebits.measure.threads import num_threads
    from samebits.runtime.predictor import Predictor

    out = Path(out_dir)
    manifest = json.loads((out / MANIFEST).read_text())
    if model_or_spec is None:
        stored = manifest.get("model")
        if not isinstance(stored, str) or not is_data_only_spec(stored):
            raise UserError(
                f"'{out}' was made by the MODEL {str(stored)[:80]!r}, which is code; pass it: samebits verify OUT_DIR MODEL"
            )
        model_or_spec = stored
    recorded = [InputFile(Path(f["path"]), f["size"], f["sha256"]) for f in manifest["inputs"]]
    try:
        now = input_files([str(f.path) for f in recorded])
    except UserError as exc:
        raise UserError(f"cannot verify '{out}': {exc}") from None
    changed = [a.path for a, b in zip(recorded, now) if a.sha256 != b.sha256]
    if changed:
        raise UserError(f"cannot verify '{out}': input '{changed[0]}' changed since the run")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"cannot verify '{out}': its manifest is schema {manifest.get('schema_version')}; this samebits reads {SCHEMA_VERSION}"
        )
    done = {s["index"]: s for s in manifest["shards"] if s.get("status") == "complete"}
    wanted = [sorted(done)[i] for i in pick(len(done), shards)] if done else []
    loaded = as_loaded(model_or_spec)
    prep = manifest.get("preprocessing") or {}
    image = ImagePrep(tuple(prep["resize"]), tuple(prep["mean"]), tuple(prep["std"])) if "resize" in prep else None
    dataset = open_dataset(now, loaded.model, image=image, skip_bad=manifest["skip_bad"])
    checked = []
    threads = manifest["threads"]
    with num_threads(threads["build"]):  # calibrated and run as the run was, not at this shell's count
        predictor = Predictor(loaded, backend=manifest["plan"]["backend"], example_inputs=example_of(loaded, dataset))
        changes, _ = bit_relevant_changes(manifest.get("fingerprint", {}), Fingerprint.capture())
    with num_threads(threads["per_worker"]), predictor:
        plan = plan_of(predictor)
        for index in wanted:
            entry = done[index]
            tensors, rows, _ = shard_outputs(predictor, dataset, entry["start"], entry["stop"], manifest["batch_size"])
            got = sample_digests(tensors, rows)
            first = next((i for i, (a, b) in enumerate(zip(got, entry["sample_sha256"])) if a != b), None)
            if first is None and len(got) != len(entry["sample_sha256"]):
                first = min(len(got), len(entry["sample_sha256"]))
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
    return PredictionsReport(str(out), checked, found)
