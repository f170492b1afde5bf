"""Ray Data, for more than one machine: :func:`predict_dataset` scores a ``ray.data.Dataset``
with ``map_batches`` and a callable class (one Predictor per actor, built from the calibration
the driver cached). ``pip install 'samebits[ray]'``.

The promise: a row's outputs are bit-identical whatever the block size, the number of actors and
the ``batch_size`` passed to ``map_batches``, and equal to ``samebits predict`` on the same samples
on this machine. Rows come back in any order (Ray's ``preserve_order`` is off): match them by the
id column, which is passed through.

    import ray
    from samebits.offline.ray_data import predict_dataset
    scored = predict_dataset(ray.data.read_parquet("in/"), "models.py:net", actors=2)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from samebits.limits import thread_count
from samebits.determinism.portable import ray_options, require as require_level
from samebits.errors import UserError


def _inputs(batch: dict[str, Any], columns: dict[str, Any]) -> Any:
    """The forward's arguments from a batch of columns (``{"positional": [...], "keywords": {...}}``)."""
    from samebits.models.inputs import ModelInputs
    from samebits.offline.parquet import as_tensor

    def tensor(name: str) -> Any:
        values = batch[name]
        return as_tensor(np.stack(list(values)) if values.dtype == object else values)  # object: a column of arrays

    return ModelInputs(
        tuple(tensor(c) for c in columns["positional"]), {p: tensor(c) for p, c in columns["keywords"].items()}
    )


class Scorer:
    """The callable class ``map_batches`` runs in each actor: a Predictor built under the
    driver's thread plan, which must reach the driver's verified plan."""

    def __init__(self, job: dict[str, Any]) -> None:
        import torch

        from samebits.measure.threads import num_threads
        from samebits.models.target import as_loaded
        from samebits.runtime.predictor import Predictor

        self.job = job
        require_level(job.get("portable"))
        loaded = as_loaded(job["spec"])
        example = _inputs(job["example"], job["columns"])
        with num_threads(job["threads"]["build"]):
            self.predictor = Predictor(
                loaded,
                device=job.get("device", "cpu"),
                backend=job["backend"],
                example_inputs=example,
                cache_dir=job["cache_dir"],
            )
        torch.set_num_threads(thread_count(job["threads"]["run"], "the run's threads per actor"))
        if self.predictor.plan.describe() != job["plan"]:
            raise RuntimeError(
                f"a Ray actor verified other batch sizes ({self.predictor.plan.describe()}) than the driver ({job['plan']}); "
                "its environment differs (threads, flags)"
            )

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from samebits.errors import UserError, first_line
        from samebits.tensors.tree import flatten

        try:
            output = self.predictor.predict(_inputs(batch, self.job["columns"]))
        except UserError:
            raise
        except Exception as exc:  # the user's model: its error, named as such (Ray re-raises it)
            raise UserError(f"the model's forward raised {first_line(exc, with_type=True)}") from None
        result = {c: batch[c] for c in self.job["keep"]}
        for path, leaf in flatten(output).items():
            result[path.strip(".") or "output"] = leaf.numpy()
        return result


def predict_dataset(
    ds: Any,
    model_spec: str,
    *,
    id_column: str = "id",
    backend: str = "eager",
    device: str = "cpu",
    batch_size: int = 64,
    actors: int = 1,
    num_cpus_per_actor: float = 0.5,
    threads_per_actor: int | None = None,
    cache_dir: str | None = None,
    portable: str | None = None,
) -> Any:
    """``ds`` scored by ``model_spec`` (a MODEL spec string: each actor loads it): a Dataset of
    ``id_column`` and one column per output path. Columns go to the forward's inputs by name, as
    for Parquet (a single other column feeds a model with one input). ``num_cpus_per_actor``
    below 1 leaves CPU for Ray's read tasks on a small machine. ``device``: where each actor's
    Predictor runs. ``portable``: the level this driver runs (``samebits run --portable``), which
    every actor is started under."""
    import ray

    from samebits.measure.prepare import check_device

    check_device(device)
    portable = require_level(portable)
    from samebits.measure.threads import num_threads
    from samebits.models.target import as_loaded
    from samebits.offline.parquet import map_columns
    from samebits.offline.workers import thread_plan
    from samebits.runtime.predictor import Predictor

    if batch_size < 1 or actors < 1:
        raise UserError("batch_size and actors must be >= 1")
    names = list(ds.columns())
    if id_column not in names:
        raise UserError(
            f"the dataset has no id column '{id_column}' (rows come back in any order); its columns: {', '.join(names)}"
        )
    loaded = as_loaded(model_spec)
    columns = map_columns([n for n in names if n != id_column], loaded.model, "the dataset")
    first = ds.take_batch(8, batch_format="numpy")
    example = _inputs(first, columns)
    threads, predictor = thread_plan(
        lambda: Predictor(loaded, device=device, backend=backend, example_inputs=example, cache_dir=cache_dir),
        example,
        actors,
        threads_per_actor,
    )
    with num_threads(threads["per_worker"]), predictor:
        job = {
            "spec": model_spec,
            "backend": backend,
            "device": device,
            "cache_dir": str(predictor.cache_dir),
            "columns": columns,
            "keep": [id_column],
            "example": first,
            "threads": {"build": threads["build"], "run": threads["per_worker"]},
            "plan": predictor.plan.describe(),
            "portable": portable,
        }
    return ds.map_batches(
        Scorer,
        fn_constructor_args=(job,),
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=num_cpus_per_actor,
        **ray_options(portable),
    )


class _ShardActor:
    """A :class:`~samebits.offline.workers.ShardWorker` in a Ray actor. Ray sets its own thread
    variables (``OMP_NUM_THREADS``) in its workers, so the fingerprint is not compared; the plan
    and the weights are, and the thread count is set from the job."""

    def __init__(self, job: dict[str, Any]) -> None:
        from samebits.offline.workers import ShardWorker

        require_level(job.get("portable"))
        self.worker = ShardWorker(job, check_fingerprint=False)

    def shard(self, index: int) -> dict[str, Any]:
        return self.worker.shard(index)


@contextlib.contextmanager
def _ray_started_in_empty_folder(ray: Any) -> Iterator[None]:
    """Ray started for the block and shut down after it, from a new empty folder (kept while Ray
    runs: its processes start there, removed after): Ray puts the driver's working folder on
    every worker's ``sys.path``, and a ``samebits.py`` in the user's ran in every actor."""
    empty, previous = tempfile.mkdtemp(prefix="samebits-ray-"), os.getcwd()
    try:
        os.chdir(empty)
        try:
            ray.init(include_dashboard=False, log_to_driver=False)
        finally:
            os.chdir(previous)
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(empty, ignore_errors=True)


def run_on_ray(job: dict[str, Any], todo: list[int], done: Any, actors: int, num_cpus_per_actor: float = 0.5) -> None:
    """``samebits predict --engine ray``: the shards of ``todo`` computed by ``actors`` Ray actors
    (a local Ray, or the cluster at ``RAY_ADDRESS``; OUT_DIR and the inputs on storage they all
    see); ``done(entry)`` for each, in the order they finish."""
    try:
        import ray
        from ray.util import ActorPool
    except ImportError:
        raise UserError("--engine ray needs Ray: pip install 'samebits[ray]'") from None
    with contextlib.nullcontext() if ray.is_initialized() else _ray_started_in_empty_folder(ray):
        _run_actors(ray, ActorPool, job, todo, done, actors, num_cpus_per_actor)


def _run_actors(
    ray: Any, pool: Any, job: dict[str, Any], todo: list[int], done: Any, actors: int, num_cpus_per_actor: float
) -> None:
    from samebits.errors import first_line

    options = ray_options(job.get("portable"))
    # the driver's MKL mode (strict_blas) where it has one; a level's own variables win
    env_vars = {**(job.get("env") or {}), **options.get("runtime_env", {}).get("env_vars", {})}
    if env_vars:
        options["runtime_env"] = {"env_vars": env_vars}
    remote: Any = ray.remote(num_cpus=num_cpus_per_actor, **options)(_ShardActor)
    handles = [remote.remote(job) for _ in range(actors)]
    try:
        for entry in pool(handles).map_unordered(lambda actor, i: actor.shard.remote(i), todo):
            done(entry)
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UserError):
            raise UserError(str(cause)) from None
        raise RuntimeError(f"a Ray actor failed: {first_line(exc)}") from None
    finally:
        for handle in handles:
            ray.kill(handle)
