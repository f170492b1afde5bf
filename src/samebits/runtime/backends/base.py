"""What every backend is: a name, what it needs to run here, the packages whose versions key its
artifacts, how its forwards use threads and inputs, and how it is built."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from samebits.errors import UserError, first_line
from samebits.models.inputs import Model, ModelInputs

if TYPE_CHECKING:
    import torch


class BackendUnavailable(UserError):
    """A backend that cannot run here (missing package, compiler or device), with the reason."""


class ExportFailed(BackendUnavailable):
    """The model could not be exported for a backend (with the exporter's reason)."""


@dataclasses.dataclass
class Built:
    runner: Callable[..., Any]
    artifact: Path | None = None
    built_here: bool = False  # False: loaded from a file another process (or run) built
    log: dict[str, Any] = dataclasses.field(default_factory=dict)  # what third-party code printed meanwhile


@dataclasses.dataclass(frozen=True)
class BuildJob:
    """What a backend builds: ``model`` on ``example`` (its shapes), into ``folder`` under files
    named ``<backend>-<key>.*``; ``threads`` and ``spinning`` for backends with their own thread
    pool; ``dynamic_batch``: one artifact for every batch size, where the backend can."""

    model: Model
    example: ModelInputs
    folder: Path
    key: str
    threads: int | None = None
    spinning: bool = True
    dynamic_batch: bool = False
    device: str = "cpu"  # where the model and the example already are (the Predictor put them there)

    def module(self, backend: str) -> torch.nn.Module:
        """The model as the ``nn.Module`` an exporter needs; the backend is unavailable for another
        callable."""
        import torch

        if not isinstance(self.model, torch.nn.Module):
            raise BackendUnavailable(
                f"the {backend} backend exports an nn.Module; this model is a {type(self.model).__name__}"
            )
        return self.model


class Backend:
    """One backend. Subclasses set the facts as class attributes and implement :meth:`build`
    (and :meth:`unavailable` where the backend needs something this machine may lack)."""

    name: ClassVar[str]
    packages: ClassVar[tuple[str, ...]] = ()  # whose versions key the backend's artifacts
    torch_threaded: ClassVar[bool] = True  # its forwards run on torch's intra-op threads
    keyword_inputs: ClassVar[bool] = True  # it takes keyword inputs (else positional only)
    auto: ClassVar[bool] = True  # backend="auto" measures it unless told otherwise
    cuda_only: ClassVar[bool] = False  # it runs on a CUDA device only
    # its CPU kernels follow the variables a portable level sets (MKL, oneDNN, ATen); a backend
    # with its own instruction-set dispatch does not, and is not run under a level
    portable_cpu: ClassVar[bool] = True
    # its forward is the eager model's own Python forward, whose every aten call a dispatcher probe
    # sees (determinism/fill.py); elsewhere the fill of uninitialized memory stays as the profile set it
    eager_dispatch: ClassVar[bool] = False

    def unavailable(self, device: str) -> str | None:
        """Why the backend cannot run here on ``device``, or ``None`` where it can."""
        if self.cuda_only and not device.startswith("cuda"):
            return f"the {self.name} backend needs a CUDA device"
        from samebits.determinism.portable import active_level

        level = active_level()
        if self.portable_cpu or level is None or not device.startswith("cpu"):
            return None
        return (
            f"the {self.name} backend's CPU kernels pick their instruction sets themselves: "
            f"portable level {level} does not pin them (docs/portable.md)"
        )

    def versions(self) -> dict[str, str]:
        """Versions of the packages the backend's artifacts depend on (part of their content key)."""
        out = {}
        for package in self.packages:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                out[package] = importlib.metadata.version(package)
        return out

    def build(self, job: BuildJob) -> Built:
        """A runner for ``job.model``; artifacts go to ``job.folder/<name>-<key>.*``."""
        raise NotImplementedError


def export_reason(exc: BaseException) -> str:
    """The line of an exporter's error that says why (its first line is a generic banner)."""
    cause = exc.__cause__ or exc
    return first_line(cause, with_type=True)
