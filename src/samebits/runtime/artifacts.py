"""One backend's runners for one model: eager runs the model itself; a compiled backend gets,
per batch size, an artifact keyed by content (model, backend versions, input shapes, device),
built once or loaded from the cache. ONNX Runtime exports one dynamic-batch file for every size
where the model allows it, else one file per size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from samebits.errors import UserError, first_line
from samebits.fingerprint.capture import device_identity
from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.backends import BackendUnavailable, backend_versions, build
from samebits.runtime.cache import artifact_key
from samebits.runtime.plan import Artifact


def input_shapes(inputs: ModelInputs) -> list[Any]:
    """``(path, dtype, shape)`` of every tensor input: what an artifact or a calibration is for."""
    return [(p, str(t.dtype), list(t.shape)) for p, t in inputs.leaves().items() if isinstance(t, torch.Tensor)]


class Runners:
    """The callable that runs a batch of each size through ``backend``."""

    def __init__(
        self,
        backend: str,
        model: Model,
        example_at: Callable[[int], ModelInputs],
        cache_dir: Path,
        device: str,
        dynamic: bool,
    ) -> None:
        self.backend, self.model, self.example_at = backend, model, example_at
        self.cache_dir, self.device, self.dynamic = cache_dir, device, dynamic
        self.artifacts: dict[int, Artifact] = {}  # by the batch size that built or loaded it
        self._built: dict[int, Any] = {}

    def at(self, size: int | None) -> Any:
        """The runner for a batch of ``size`` rows, built (or loaded) on first use."""
        if self.backend == "eager" or size is None:
            return self.model
        slot = 0 if self.dynamic else size  # a dynamic-batch artifact serves every size
        if slot not in self._built:
            # A dynamic batch is exported from a batch of 2 or more: torch.export specialises a dim of size 1.
            example = self.example_at(max(size, 2) if self.dynamic else size)
            shapes = [(p, d, ["N", *s[1:]] if self.dynamic else s) for p, d, s in input_shapes(example)]
            key = artifact_key(
                self.model,
                {
                    "backend": self.backend,
                    "versions": backend_versions(self.backend),
                    "shapes": shapes,
                    "device": device_identity(self.device),  # an engine built for another GPU kind fails to load
                    "dynamic_batch": self.dynamic,
                },
            )
            try:  # idle ONNX Runtime threads would spin and slow everything else: spinning off
                built = build(
                    self.backend,
                    self.model,
                    example,
                    self.cache_dir,
                    key,
                    device=self.device,
                    spinning=False,
                    dynamic_batch=self.dynamic,
                )
            except BackendUnavailable:
                if not self.dynamic:
                    raise
                self.dynamic = False  # the model does not export with a dynamic batch: one file per size
                return self.at(size)
            except UserError:
                raise
            except Exception as exc:
                raise BackendUnavailable(
                    f"the {self.backend} backend could not be built for this model: {first_line(exc, with_type=True)}"
                ) from exc
            self._built[slot] = built.runner
            self.artifacts[size] = Artifact(
                str(built.artifact) if built.artifact else None, built.built_here, built.log
            )
        return self._built[slot]
