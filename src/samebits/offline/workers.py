"""``samebits predict --workers K``: K processes, each with its own Predictor built from the
calibration the parent cached (so every worker runs the same verified sizes), each reading and
writing whole shards; the parent hands out shard indices and keeps the manifest.

Threads per worker are pinned. By default they are the cores shared out, but only where this
model's bits do not depend on the thread count (measured: 1 thread against all cores, at every
verified batch size, on the calibration's samples); where they do, every worker runs 1 thread whatever K, so that outputs do not
depend on the number of workers either."""

from __future__ import annotations

import json
import os
import selectors
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samebits.errors import UserError
from samebits.limits import thread_count
from samebits.measure.batching import batch_size_of, concat_batches, take_rows
from samebits.measure.job import ENTRY, Job
from samebits.measure.spawn import Child, ChildDied, ProtocolError
from samebits.measure.wire import Message
from samebits.measure.threads import num_threads
from samebits.models.inputs import ModelInputs
from samebits.runtime.backends import REGISTRY
from samebits.tensors.digest import leaf_digest
from samebits.tensors.tree import flatten

if TYPE_CHECKING:
    from samebits.models.spec import LoadedModel
    from samebits.runtime.predictor import Predictor


def needs_spec(loaded: LoadedModel) -> None:
    """Workers load the model themselves: it must be a MODEL spec, not an object in memory."""
    if loaded.in_memory:
        raise UserError(
            "--workers > 1 needs a MODEL spec that a fresh process can load (file.py:factory, demo:NAME, ...), "
            "not a model object"
        )


def _bits(predictor: Predictor, first: ModelInputs) -> list[str]:
    """Digests of the predictor's outputs at every batch size it runs (each verified size; the
    first samples repeated to fill it): a thread count can change the bits at some sizes only."""
    n = batch_size_of(first) or 1
    out = []
    for size in sorted(set(predictor.plan.sizes)) or [1, 7, 64]:
        batch = take_rows(concat_batches([first] * -(-size // n)), 0, size)
        out += [leaf_digest(leaf) for leaf in flatten(predictor.predict(batch)).values()]
    return out


def thread_plan(
    build: Callable[[], Predictor], example: ModelInputs, workers: int, threads_per_worker: int | None
) -> tuple[dict[str, Any], Predictor]:
    """(the thread plan, a Predictor built and calibrated under it). ``build`` threads calibrate,
    ``per_worker`` threads run. Without ``threads_per_worker``, the Predictor is calibrated at
    every core whatever the worker count (so its verified sizes are too) and runs at the cores
    shared out, where its outputs at every verified size are the same at 1 thread and at every
    core; where they are not, it is calibrated and run at 1 thread."""
    if threads_per_worker:
        thread_count(threads_per_worker, "--threads-per-worker")
        with num_threads(threads_per_worker):
            predictor = build()
        return _plan(threads_per_worker, threads_per_worker, True, "--threads-per-worker"), predictor
    cores = os.cpu_count() or 1
    with num_threads(cores):
        predictor = build()
    if cores == 1:
        return _plan(1, 1, True, "this machine has one core"), predictor
    # Backends whose forwards run on torch's intra-op threads: the thread count's effect on the
    # bits is measured; others size their own pools when built.
    if all(REGISTRY[b].torch_threaded for b in predictor.plan.backends):
        if not _threads_change_bits(predictor, example, cores):
            why = (
                f"measured: 1 and {cores} threads give this model the same bits; the {cores} cores shared by {workers}"
            )
            return _plan(cores, max(1, cores // workers), False, why), predictor
        why = (
            f"measured: 1 and {cores} threads give this model different bits; every worker runs 1 thread "
            "whatever --workers, so the outputs do not depend on it (--threads-per-worker chooses another)"
        )
    else:
        why = (
            f"the {'/'.join(predictor.plan.backends)} backend sizes its thread pool when it is built, so the thread count was not "
            "measured: 1 thread per worker whatever --workers (--threads-per-worker chooses another)"
        )
    predictor.close()
    with num_threads(1):
        predictor = build()
    return _plan(1, 1, True, why), predictor


def _threads_change_bits(predictor: Predictor, example: ModelInputs, cores: int) -> bool:
    """Whether 1 thread and ``cores`` threads give other bits, measured once per calibration
    (cached beside it, under its key)."""
    from samebits.runtime.cache import ArtifactCache

    store = ArtifactCache(predictor.cache_dir)
    key = predictor.calibration_key or predictor.weights_sha256  # a plan without sizes has no calibration
    name = f"threads-{key[:32]}-{cores}.json"
    cached = store.read_json(name)
    if cached is not None and isinstance(cached.get("differs"), bool):
        return bool(cached["differs"])
    with num_threads(1):
        one = _bits(predictor, example)
    with num_threads(cores):
        every = _bits(predictor, example)
    differs = one != every
    if store.writable or not store.is_cache:
        store.build_once(name, lambda tmp: tmp.write_text(json.dumps({"differs": differs})), kind="thread-plan")
    return differs


def _plan(build: int, per_worker: int, fixed: bool, why: str) -> dict[str, Any]:
    return {"build": build, "per_worker": per_worker, "fixed": fixed, "why": why}


def compared_threads(plan: dict[str, Any]) -> dict[str, Any]:
    """What a resume must match: the calibration's thread count, and the run's where it is fixed
    (where it is free, another worker count gives the same bits)."""
    return {"build": plan["build"], "run": plan["per_worker"] if plan["fixed"] else "any"}


class ShardWorker:
    """What one worker holds: the dataset and a Predictor built under the parent's thread plan,
    which must reach the parent's plan, weights and (``check_fingerprint``) bit-relevant
    fingerprint; :meth:`shard` computes and writes one shard."""

    def __init__(self, job: dict[str, Any], *, check_fingerprint: bool = True) -> None:
        import torch

        from samebits.fingerprint.diff import bit_relevant_digest
        from samebits.models.target import as_loaded
        from samebits.offline.images import ImagePrep
        from samebits.offline.shard import example_of, open_dataset
        from samebits.offline.sources import InputFile
        from samebits.runtime.predictor import Predictor

        self.job = job
        loaded = as_loaded(job["spec"])
        files = [InputFile.from_dict(f) for f in job["files"]]
        image = ImagePrep(tuple(job["image"]["size"]), tuple(job["image"]["mean"]), tuple(job["image"]["std"]))
        self.dataset = open_dataset(files, loaded.model, image=image, skip_bad=job["skip_bad"])
        with num_threads(job["threads"]["build"]):  # calibrated as the parent was: its cached calibration
            self.predictor = Predictor(
                loaded,
                device=job.get("device", "cpu"),
                backend=job["backend"],
                example_inputs=example_of(self.dataset),
                cache_dir=job["cache_dir"],
                max_batch_size=job["max_batch_size"],
            )
        torch.set_num_threads(thread_count(job["threads"]["run"], "the run's threads per worker"))
        self.identity = {
            "plan": self.predictor.plan.describe(),
            "fingerprint_sha256": bit_relevant_digest(self.predictor.fingerprint),
            "weights_sha256": self.predictor.weights_sha256,
        }
        checked = [k for k in self.identity if check_fingerprint or k != "fingerprint_sha256"]
        differs = [k for k in checked if self.identity[k] != job["expect"][k]]
        if differs:
            self.predictor.close()
            raise UserError(
                f"a worker got another {differs[0].replace('_', ' ')} than the parent "
                f"({self.identity[differs[0]]} vs {job['expect'][differs[0]]}); run with --workers 1"
            )

    def shard(self, index: int) -> dict[str, Any]:
        from samebits.offline.shard import compute_shard

        job = self.job
        return compute_shard(
            self.predictor, self.dataset, index, job["shard_size"], job["batch_size"], Path(job["out"])
        )

    def close(self) -> None:
        self.predictor.close()

    def __enter__(self) -> ShardWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class WorkerPool:
    """K worker processes (``python -m samebits.child shard``), one request at a time each."""

    def __init__(self, job: dict[str, Any], k: int) -> None:
        self.job = job
        self.children: list[Child] = []
        try:
            for _ in range(k):
                child = Child(ENTRY, ["shard"], pipes=True)
                self.children.append(child)
                child.send(Job("shard", params=job).message())
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, todo: list[int], done: Callable[[dict[str, Any]], None]) -> None:
        """Hand out ``todo`` (shard indices) to whichever worker is free; ``done(entry)`` for
        each finished shard. A worker's error stops every worker: one line, exit 2."""
        queue = list(todo)
        selector = selectors.DefaultSelector()
        for child in self.children:
            selector.register(child.stdout, selectors.EVENT_READ, child)
        open_ = len(self.children)
        while open_:
            for key, _ in selector.select(timeout=1.0):
                child = key.data
                try:
                    reply = child.reply()
                except ChildDied as exc:
                    child.finish(timeout=0 if isinstance(exc, ProtocolError) else 5)
                    raise RuntimeError(
                        f"a predict worker: {exc}"
                        if isinstance(exc, ProtocolError)
                        else child.ended("a predict worker")
                    ) from None
                if reply.error is not None:
                    if reply.internal:
                        raise RuntimeError(reply.error)
                    raise UserError(reply.error)
                if "done" in reply.data:
                    done(reply.data["done"])
                if queue:
                    child.send(Message({"shard": queue.pop(0)}))
                else:
                    selector.unregister(child.stdout)
                    child.close_input()  # no more work: it exits
                    open_ -= 1
        for child in self.children:
            child.finish(timeout=60)

    def close(self) -> None:
        for child in self.children:
            child.kill()
