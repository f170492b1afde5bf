"""Try the faster backends that are installed: each timed briefly against eager, with its bits."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from samebits.errors import first_line
from samebits.measure.timing import Timings
from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.backends import REGISTRY, BackendUnavailable, build
from samebits.tensors.compare import compare

BACKENDS = tuple(n for n in REGISTRY if n != "eager")  # what doctor can try against eager (default: DoctorOptions)


def try_backends(
    model: Model,
    inputs: ModelInputs,
    names: tuple[str, ...],
    eager: Callable[[], Any],
    timer: Callable[..., Timings],
    device: str = "cpu",
) -> list[dict[str, Any]]:
    """For each backend: speed relative to eager (``ratio``, a :class:`Ratio`, and ``speedup``, its
    JSON), and whether its outputs have eager's bits."""
    results = []
    reference = eager()
    with tempfile.TemporaryDirectory(prefix="samebits-doctor-") as tmp:
        for name in names:
            entry: dict[str, Any] = {"backend": name}
            try:
                with torch.inference_mode():
                    # ONNX Runtime's idle threads would otherwise spin and slow the eager rounds.
                    built = build(name, model, inputs, Path(tmp), "doctor", device=device, spinning=False)
                    runner = built.runner
                    out = runner(*inputs.args, **inputs.kwargs)
                    times = timer({"eager": eager, name: lambda: runner(*inputs.args, **inputs.kwargs)})
                result = compare(reference, out)
                worst = result.first_difference()
                entry.update(
                    status="ran",
                    ratio=(ratio := times.ratio("eager", name)),
                    speedup=ratio.to_dict(),
                    identical=result.identical,
                    max_abs=worst.max_abs if worst else 0.0,
                    difference=worst.brief() if worst else "identical bits",
                    log=built.log,
                )
            except BackendUnavailable as exc:
                entry.update(status="skipped", reason=str(exc))
            except Exception as exc:
                entry.update(status="error", reason=first_line(exc, with_type=True))
            results.append(entry)
    return results
