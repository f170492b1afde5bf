"""A Predictor as a model: how ``check --runtime predictor``, ``record --runtime`` and their child
processes run a model through the runtime."""

from __future__ import annotations

from typing import Any

from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.backends import BACKENDS
from samebits.runtime.predictor import Predictor


class PredictorModel:
    """A Predictor as a callable model whose calls go through :meth:`Predictor.predict`; this is
    how ``samebits check --runtime predictor`` runs its axes."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.predictor.predict(ModelInputs(args, kwargs))


def parse_runtime(runtime: str) -> str:
    """``predictor`` or ``predictor:BACKEND`` -> the backend name."""
    kind, _, backend = runtime.partition(":")
    if kind != "predictor":
        raise UserError(f"unknown runtime '{runtime}'; use predictor or predictor:BACKEND ({', '.join(BACKENDS)})")
    backend = backend or "eager"
    if backend != "auto" and backend not in BACKENDS:
        raise UserError(f"unknown backend '{backend}' in --runtime; choose from {', '.join(BACKENDS)} or auto")
    return backend


def runtime_model(
    model: Model,
    inputs: ModelInputs,
    runtime: str,
    cache_dir: str | None = None,
    max_batch_size: int | None = None,
    device: str = "cpu",
    batch_invariant: int | None = None,
) -> PredictorModel:
    """Wrap ``model`` in a Predictor for ``runtime`` (``predictor[:BACKEND]``) on ``device``,
    calibrated up to ``max_batch_size`` rows (its default where ``None``)."""
    predictor = Predictor(
        model,
        device=device,
        backend=parse_runtime(runtime),
        example_inputs=inputs,
        cache_dir=cache_dir,
        max_batch_size=max_batch_size,
        batch_invariant=batch_invariant or False,
    )
    return PredictorModel(predictor)
