"""The readiness self-check of ``samebits serve --golden FILE``: this process, through the served
path, must reproduce the golden's bits row by row (the golden recorded with
``samebits record MODEL --runtime predictor[:BACKEND]``)."""

from __future__ import annotations

from typing import Any

import torch

from samebits.errors import UserError
from samebits.golden.format import read_golden
from samebits.measure.batching import batch_size_of, output_rows, take_rows
from samebits.tensors.tree import flatten


def golden_mismatch(predict: Any, backend: str, path: str) -> str | None:
    """Why this server does not reproduce the golden at ``path`` (None: it does, bit for bit).
    ``predict(batch)`` is the served path; each stored input row is run alone through it."""
    golden = read_golden(path)
    runtime = golden.header.get("runtime")
    if not runtime or not str(runtime).startswith("predictor"):
        raise UserError(
            f"'{path}' was recorded without a runtime; record it through the served path: "
            "samebits record MODEL -o FILE --runtime predictor[:BACKEND]"
        )
    recorded_backend = str(runtime).partition(":")[2] or "eager"
    if recorded_backend != backend and not (backend == "auto" and recorded_backend == "eager"):
        return f"the golden was recorded through {runtime}, this server runs backend {backend}"
    inputs = golden.inputs()
    n = batch_size_of(inputs)
    if n is None:
        return "the golden's inputs have no batch dimension 0"
    expected = golden.outputs
    for i in range(n):
        got = flatten(predict(take_rows(inputs, i, i + 1)))
        for p, want in expected.items():
            if not isinstance(want, torch.Tensor):
                continue
            row = output_rows(want, i, i + 1, n)
            if p not in got or not isinstance(got[p], torch.Tensor) or not torch.equal(got[p], row):
                diff = (
                    (got[p].double() - row.double()).abs().max().item()
                    if p in got and isinstance(got[p], torch.Tensor) and got[p].shape == row.shape
                    else None
                )
                return f"row {i} output {p or '<output>'} differs from the golden" + (
                    f" (max abs diff {diff:.3g})" if diff is not None else " (shape or type)"
                )
    return None
