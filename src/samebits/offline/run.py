"""``samebits predict``: offline batch inference over input files into shards of outputs.

The samples of all input files form one sequence; shard ``i`` is samples ``[i·S, (i+1)·S)``.
Each shard is read on its own (never all inputs in memory), run through one
:class:`~samebits.runtime.Predictor` in chunks of ``batch_size`` and written atomically as
``shard-NNNNNN.safetensors``. ``manifest.json`` lists what the run was (model weights,
bit-relevant fingerprint, plan, threads per worker, shard size, input files) and, for each
complete shard only, its samples, file digest and per-sample output digests. A run stopped at
any point and resumed (``resume=True``) skips the complete shards whose files still have their
digest and redoes the rest: the same bytes as an uninterrupted run. Per-sample outputs do not
depend on the batch size, the shard size or the number of workers (offline/workers.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any


from samebits.determinism.portable import active_level
from samebits.errors import UserError
from samebits.limits import batch_rows, max_threads, thread_count
from samebits.files import BadJson, FolderBusy, atomic_write, exclusive, folder_state, read_json, xxh3_file
from samebits.measure.batching import take_rows
from samebits.measure.prepare import check_device, device_kind
from samebits.models.inputs import Model, ModelInputs
from samebits.models.target import ModelOrSpec, as_loaded
from samebits.offline.dataset import Dataset
from samebits.offline.shard import compute_shard, example_of, open_dataset, shard_name
from samebits.offline.images import ImagePrep
from samebits.offline.sources import InputFile, input_files

if TYPE_CHECKING:
    from samebits.runtime.predictor import Predictor

# 2: shards are ranges of the input samples; skipped samples; threads per worker
# 3: input files digested with xxh3-128 (change detection; sha256 was 10x slower on 20 us/sample models)
# 4: shard files and per-sample outputs digested with xxh3-128 (`xxh3_128`, `sample_xxh3_128`): sha256
#    per sample was 10% of a demo:mlp run, sha256 of the shard files 4% of a BERT run
SCHEMA_VERSION = 4
MANIFEST = "manifest.json"
LOCK = ".samebits-predict.lock"  # held while a run writes; a second run into the folder is refused
DEFAULT_SHARD = 1000
DEFAULT_BATCH = 64
# What must be equal for a resume (and a verify) to be the same job.
COMPARED = (
    "schema_version",
    "weights_sha256",
    "thread_plan",
    "fingerprint_sha256",
    "plan",
    "shard_size",
    "skip_bad",
    "preprocessing",
    "inputs",
)


@dataclasses.dataclass
class PredictReport:
    out_dir: Path
    samples: int  # samples with an output
    skipped: int  # samples (and files) left out under skip_bad
    shards: int
    computed: int  # shards computed in this run (the others were complete already)
    seconds: float
    threads: dict[str, Any]  # threads per worker, and why
    notes: list[str] = dataclasses.field(default_factory=list)  # what the Predictor's plan costs (measured)


def preprocessing_of(files: list[InputFile], dataset: Dataset) -> dict[str, Any] | None:
    """What turns files into tensors, where it is more than reading them (manifest field)."""
    if files and files[0].kind == "images":
        return dataset.options["image"].to_dict()  # type: ignore[no-any-return]
    if files and files[0].kind == "parquet":
        return {"columns": dataset.options["columns"], "floats": "float32", "integers": "int64"}
    return None


def header_of(
    predictor: Predictor,
    spec: str,
    batch_size: int,
    shard_size: int,
    files: list[InputFile],
    dataset: Dataset,
    threads: dict[str, Any],
) -> dict[str, Any]:
    from samebits.fingerprint.diff import bit_relevant_digest
    from samebits.offline.workers import compared_threads

    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "predict",
        "model": spec,
        "weights_sha256": predictor.weights_sha256,
        "fingerprint_sha256": bit_relevant_digest(predictor.fingerprint),
        "fingerprint": predictor.fingerprint,  # in full, for verify to say what changed
        "plan": predictor.plan.describe(),
        "thread_plan": compared_threads(threads),
        "threads": threads,
        "batch_size": batch_size,  # recorded, not compared: outputs do not depend on it
        "max_batch_size": predictor.max_batch_size,  # what the calibration tried up to (verify rebuilds it)
        "device": device_kind(predictor.device),  # verify recomputes on the same kind of device
        "shard_size": shard_size,
        "samples": dataset.total,
        "skip_bad": dataset.skip_bad,
        "skipped_files": [s.to_dict() for s in dataset.skipped_files],
        "preprocessing": preprocessing_of(files, dataset),
        "inputs": [f.to_dict() for f in files],
    }


MANIFEST_EVERY = 0.5  # least seconds between manifest rewrites; a shard done but not yet listed is redone by --resume
MANIFEST_SHARE = 0.02  # and at most this share of the run's time spent rewriting it


def _compact(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))  # compact: the C encoder, 10x faster


class Manifest:
    """The manifest of one predict run, rewritten as shards complete. Each shard's entry is
    encoded once (a rewrite joins the texts: a million per-sample digests are 35 MB of JSON,
    130 ms to encode), and rewrites are spaced at least ``MANIFEST_EVERY`` apart and so that
    they take at most ``MANIFEST_SHARE`` of the time; the last one is written at the end."""

    def __init__(self, out: Path, header: dict[str, Any]) -> None:
        self.path = out / MANIFEST
        self._head = [(k, _compact(v)) for k, v in header.items() if k != "shards"]  # the same every rewrite
        self.shards: dict[int, dict[str, Any]] = {}
        self._texts: dict[int, str] = {}
        self._written, self._spacing = time.monotonic(), MANIFEST_EVERY

    def add(self, entry: dict[str, Any]) -> None:
        self.shards[entry["index"]] = entry
        self._texts[entry["index"]] = _compact(entry)

    def text(self) -> str:
        """The manifest's JSON, as ``json.dumps(..., sort_keys=True)`` writes it compactly."""
        shards = "[" + ",".join(self._texts[i] for i in sorted(self._texts)) + "]"
        items = sorted([*self._head, ("shards", shards)])
        return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in items) + "}\n"

    def write(self) -> None:
        started = time.monotonic()
        text = self.text()
        try:
            atomic_write(self.path, lambda tmp: tmp.write_text(text))
        except OSError as exc:
            raise UserError(f"cannot write '{self.path}': {exc.strerror or exc}") from None
        self._written = time.monotonic()
        self._spacing = max(MANIFEST_EVERY, (self._written - started) / MANIFEST_SHARE)

    def written_lately(self) -> bool:
        """Whether a rewrite now would come sooner than the spacing allows."""
        return time.monotonic() - self._written < self._spacing


def _resumable(out: Path, header: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The complete shards of an earlier run of the same job; a different job is one line."""
    try:
        old = read_json(out / MANIFEST)
    except BadJson as exc:
        raise UserError(f"cannot resume: '{out / MANIFEST}' is unreadable (it is {exc})") from None
    if not isinstance(old, dict) or old.get("kind") != "predict":
        raise UserError(f"cannot resume: '{out / MANIFEST}' is not a samebits predict manifest")
    for key in COMPARED:
        if old.get(key) != header[key]:
            was = f" ({old.get(key)} then, {header[key]} now)" if key == "thread_plan" else ""
            raise UserError(
                f"cannot resume into '{out}': the {key.replace('_', ' ')} differs from the earlier run's{was}; "
                "use another OUT_DIR"
            )
    if old.get("device", "cpu") != header["device"]:  # manifests before the device was kept: the CPU
        raise UserError(
            f"cannot resume into '{out}': the earlier run ran on {old.get('device', 'cpu')}, this one on "
            f"{header['device']}; use another OUT_DIR"
        )
    shards = old.get("shards")
    return {e["index"]: e for e in shards if is_entry(e)} if isinstance(shards, list) else {}


_ENTRY = {"index": int, "start": int, "stop": int, "samples": int, "xxh3_128": str, "sample_xxh3_128": list}


def is_entry(entry: Any) -> bool:
    """Whether ``entry`` is a well-formed complete shard entry (an edited one is redone, not trusted)."""
    return (
        isinstance(entry, dict)
        and entry.get("status") == "complete"
        and all(isinstance(entry.get(k), t) and not isinstance(entry.get(k), bool) for k, t in _ENTRY.items())
        and len(entry["sample_xxh3_128"]) == entry["samples"]
    )


def shard_count(total: int, size: int) -> int:
    return -(-total // size)


def _check_out_dir(out: Path, resume: bool) -> bool:
    """Whether ``out`` holds a manifest; a folder samebits must not write into is one line."""
    state = folder_state(out, MANIFEST, ignore=(LOCK,), kind="predict")
    if state == "broken link":
        raise UserError(f"'{out}' is a broken symbolic link; OUT_DIR must be a folder")
    if state == "file":
        raise UserError(f"'{out}' is a file; OUT_DIR must be a folder")
    if state == "foreign":
        why = "holds no samebits manifest"
        if (out / MANIFEST).is_file():
            try:
                read_json(out / MANIFEST)
                why = f"holds a {MANIFEST} that is not a samebits predict manifest"
            except BadJson as exc:
                why = f"holds a {MANIFEST} that is unreadable (it is {exc})"
        raise UserError(f"'{out}' exists, is not empty and {why}; choose another OUT_DIR")
    has_manifest = state == "mine"
    if has_manifest and not resume:
        raise UserError(
            f"'{out}' exists and is not empty; pass --resume to continue a run there, or choose another OUT_DIR"
        )
    return has_manifest


@contextlib.contextmanager
def _only_run_in(out: Path, resume: bool) -> Iterator[bool]:
    """Hold OUT_DIR's lock for the run (a second run into it is one line) and check it again
    under the lock; whether it holds a manifest."""
    try:
        with exclusive(out / LOCK):
            yield _check_out_dir(out, resume)
    except FolderBusy:
        raise UserError(
            f"'{out}' is being written by another samebits predict run; wait for it to end or choose another OUT_DIR"
        ) from None


def _make_writable(out: Path) -> None:
    """Create OUT_DIR and make sure files can be written there; one line where they cannot."""
    import tempfile

    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".samebits-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"cannot write into OUT_DIR '{out}': {exc.strerror or exc}") from None


def _check_forward(model: Model, example: ModelInputs) -> None:
    """The model runs on the data's first samples (else the Predictor's calibration would fail
    with a less direct message)."""
    from samebits.measure.guard import ForwardError, check_forward

    try:
        check_forward(model, example)
        check_forward(model, take_rows(example, 0, 1))  # one sample, as batches of one will run
    except ForwardError as exc:
        shapes = [list(t.shape[1:]) for t in example.leaves().values() if getattr(t, "ndim", 0)]
        sample = ", ".join(map(str, shapes)) or "?"
        raise UserError(
            f"{exc} on the first samples of the inputs (are they the inputs this model takes? dim 0 of each "
            f"input is the batch, so one sample here is {sample}: a file of one sample keeps a leading 1, "
            "e.g. [1, 3, 64, 64] for one 3x64x64 image)"
        ) from None


def predict(
    model_or_spec: ModelOrSpec,
    inputs: list[str],
    out_dir: str | Path,
    *,
    batch_size: int = DEFAULT_BATCH,
    max_batch_size: int | None = None,
    backend: str = "eager",
    shard_size: int = DEFAULT_SHARD,
    resume: bool = False,
    workers: int = 1,
    engine: str = "local",
    threads_per_worker: int | None = None,
    skip_bad: bool = False,
    image: ImagePrep | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    device: str = "cpu",
) -> PredictReport:
    """Run ``model_or_spec`` over the samples in ``inputs`` (files or folders) into ``out_dir``.

    ``workers`` processes (each with ``threads_per_worker`` threads; default: the cores shared
    out, or 1 for every worker count where the thread count changes this model's bits) share
    the calibration cache and run the same verified sizes. ``skip_bad`` leaves out samples that
    cannot be read and lists them in the manifest. ``engine="ray"`` computes the shards in
    ``workers`` Ray actors instead of local processes. ``progress(done, total)`` after each shard.
    ``device``: where the Predictors run (the shards hold CPU tensors)."""
    from samebits.measure.threads import num_threads
    from samebits.offline.workers import WorkerPool, needs_spec, thread_plan
    from samebits.runtime.predictor import Predictor

    started = time.monotonic()
    check_device(device)
    batch_rows(batch_size, "--batch-size")
    if max_batch_size is not None:
        batch_rows(max_batch_size, "--max-batch-size")
    batch_rows(shard_size, "--shard-size")
    if workers < 1 or workers > max_threads():
        raise UserError(f"--workers must be from 1 to {max_threads()} (4 per core here), not {workers}")
    if threads_per_worker is not None:
        thread_count(threads_per_worker, "--threads-per-worker")
    out = Path(out_dir)
    _check_out_dir(out, resume)
    files = input_files(inputs)
    loaded = as_loaded(model_or_spec)
    if engine not in ("local", "ray"):
        raise UserError(f"unknown engine '{engine}'; choose local or ray")
    if workers > 1 or engine == "ray":
        needs_spec(loaded)
    dataset = open_dataset(files, loaded.model, image=image, skip_bad=skip_bad)
    _make_writable(out)  # before the Predictor calibrates, not after
    with _only_run_in(out, resume) as has_manifest:
        example = example_of(dataset)
        _check_forward(loaded.model, example)
        # The plan (verified sizes) must not depend on --batch-size, or neither would the bits: the
        # Predictor keeps its own maximum, and batch_size only cuts the calls to it.
        threads, predictor = thread_plan(
            lambda: Predictor(
                loaded,
                device=device,
                backend=backend,
                example_inputs=example,
                cache_dir=cache_dir,
                max_batch_size=max_batch_size,
            ),
            example,
            workers,
            threads_per_worker,
        )
        if predictor.plan.coupled:
            predictor.close()
            raise UserError(
                f"samebits predict cuts the inputs into batches, which would change this model's outputs: "
                f"{predictor.invariance.measured['coupled']}; run Predictor.predict on the batches you mean"
            )
        with num_threads(threads["per_worker"]), predictor:
            header = header_of(predictor, loaded.spec, batch_size, shard_size, files, dataset, threads)
            complete = _resumable(out, header) if resume and has_manifest else {}
            out.mkdir(parents=True, exist_ok=True)
            manifest = Manifest(out, header)
            shards = manifest.shards
            todo = []
            for index in range(shard_count(dataset.total, shard_size)):
                start, stop = index * shard_size, min((index + 1) * shard_size, dataset.total)
                path, entry = out / shard_name(index), complete.get(index)
                if (
                    entry
                    and (entry.get("start"), entry.get("stop")) == (start, stop)
                    and path.is_file()
                    and xxh3_file(path) == entry.get("xxh3_128")
                ):
                    manifest.add(entry)  # complete, and its file unchanged
                else:
                    todo.append(index)
            manifest.write()
            counted = [sum(s["stop"] - s["start"] for s in shards.values())]

            def done(entry: dict[str, Any]) -> None:
                manifest.add(entry)
                if not manifest.written_lately():  # rewriting it per shard would be quadratic
                    manifest.write()
                counted[0] += entry["stop"] - entry["start"]
                if progress is not None:
                    progress(counted[0], dataset.total)

            try:
                if engine == "local" and (workers == 1 or len(todo) < 2):
                    for index in todo:
                        done(compute_shard(predictor, dataset, index, shard_size, batch_size, out))
                else:
                    predictor.close()  # the workers build their own, from the calibration cached by this one
                    job = {
                        "spec": loaded.spec,
                        "backend": backend,
                        "device": device,
                        "max_batch_size": predictor.max_batch_size,
                        "cache_dir": str(predictor.cache_dir),
                        "files": [f.to_dict() for f in files],
                        "image": dataclasses.asdict(dataset.options["image"]),
                        "skip_bad": skip_bad,
                        "shard_size": shard_size,
                        "batch_size": batch_size,
                        "threads": {"build": threads["build"], "run": threads["per_worker"]},
                        "out": str(out),
                        "expect": {k: header[k] for k in ("plan", "fingerprint_sha256", "weights_sha256")},
                        "portable": active_level(),  # Ray's actors start under it (runtime_env)
                        # and with the MKL mode this process started under (strict_blas)
                        "env": {k: os.environ[k] for k in ("MKL_CBWR",) if k in os.environ},
                    }
                    if engine == "ray":
                        from samebits.offline.ray_data import run_on_ray

                        run_on_ray(job, todo, done, max(1, min(workers, len(todo))))
                    else:
                        with WorkerPool(job, min(workers, len(todo))) as pool:
                            pool.run(todo, done)
            finally:  # complete shards are listed, whatever stopped the run
                manifest.write()
    samples = sum(s["samples"] for s in shards.values())
    skipped = sum(len(s.get("skipped", [])) for s in shards.values()) + len(dataset.skipped_files)
    notes = list(predictor.plan.notes)
    return PredictReport(out, samples, skipped, len(shards), len(todo), time.monotonic() - started, threads, notes)
