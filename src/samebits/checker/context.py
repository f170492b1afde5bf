"""What every axis needs: the model, its inputs, the options, and shared helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


from samebits.checker.options import CheckOptions
from samebits.checker.report import Difference, Growth, ModuleStat, Origin
from samebits.models.inputs import Model, ModelInputs
from samebits.measure.trace import Divergence, Trace, digested_forward, traced_forward
from samebits.tensors.compare import TreeComparison, compare_trees
from samebits.tensors.tree import flatten


PROFILE_MODULES = 512  # differing module calls whose outputs a localising re-run keeps


@dataclasses.dataclass
class CheckContext:
    model: Model
    inputs: ModelInputs
    options: CheckOptions
    spec: str | None
    hookable: bool
    progress: Callable[[str], None] = lambda message: None
    module: Any = None  # the model whose parameters and buffers count (the Predictor's own, for --runtime)
    first_forward_changed: list[str] = dataclasses.field(default_factory=list)  # by the check's first forward

    def __post_init__(self) -> None:
        if self.module is None:
            self.module = self.model

    def compare(self, a: object, b: object) -> TreeComparison:
        """Compare two outputs with the check's tolerance (bits when none was given)."""
        return self.compare_flat(flatten(a), flatten(b))

    def compare_flat(self, a: dict[str, Any], b: dict[str, Any]) -> TreeComparison:
        """Like :meth:`compare`, for outputs already flattened to ``{path: leaf}``."""
        return compare_trees(a, b, atol=self.options.atol, rtol=self.options.rtol)

    def forward(self, inputs: ModelInputs | None = None) -> tuple[Any, Trace]:
        """One forward without hooks: the output and its digests (every axis measures with this)."""
        return digested_forward(self.model, inputs or self.inputs)

    def traced(
        self, inputs: ModelInputs | None = None, keep: set[str] | None = None, rows: tuple[int, int] | None = None
    ) -> tuple[Any, Trace, dict[str, Any]]:
        """One forward with per-module digests (and the tensors of the calls in ``keep``): run only
        to localise an axis that diverged."""
        return traced_forward(self.model, inputs or self.inputs, rows=rows, keep=keep if self.hookable else None)

    @property
    def localizes(self) -> bool:
        return self.hookable and self.options.localize


def origin_from(
    divergence: Divergence | None,
    kept_a: dict[str, Any] | None = None,
    kept_b: dict[str, Any] | None = None,
    compare: Callable[[Any, Any], TreeComparison] | None = None,
) -> Origin | None:
    """An :class:`Origin` from a divergence, with the difference and its growth where the kept
    tensors of a second pass are available."""
    if divergence is None:
        return None
    call = divergence.call
    note = (
        "" if divergence.inputs_identical else "its inputs differed too: the difference starts in code between modules"
    )
    if call.name == "" and divergence.inputs_identical:
        note = "in the model's own forward, between its submodules (or in a submodule hooks cannot see)"
    origin = Origin(call.label, call.type, divergence.inputs_identical, note)
    if kept_a and kept_b and compare is not None:
        stats: dict[str, Growth] = {}
        for c, differs in divergence.calls or [(call, True), *((m, True) for m in divergence.later)]:
            if differs and c.key in kept_a and c.key in kept_b:
                diff = Difference.from_comparison(compare(kept_a[c.key], kept_b[c.key]))
                if c.key == call.key:
                    origin.difference = diff
                    origin.keep_tensors(kept_a[c.key], kept_b[c.key])
                if diff is not None:
                    pct = 100.0 * diff.mismatched / diff.numel if diff.numel else 0.0
                    stats[c.key] = Growth(c.label, c.type, diff.max_abs, round(pct, 2))
        chain = [call, *divergence.later]
        origin.growth = [stats[c.key] for c in chain if c.key in stats]
        origin.profile = [
            ModuleStat(c.label, c.type, False, stats[c.key].max_abs, stats[c.key].mismatched_pct)
            if c.key in stats
            else ModuleStat(c.label, c.type, not differs, 0.0 if not differs else None, 0.0 if not differs else None)
            for c, differs in divergence.calls
        ]
    return origin


def op_origin(
    ctx: CheckContext,
    origin: Origin | None,
    divergence: Divergence | None,
    a: ModelInputs,
    b: ModelInputs,
    rows_a: tuple[int, int] | None = None,
    rows_b: tuple[int, int] | None = None,
) -> None:
    """Look inside the origin module: the first aten op whose output differs between a run on
    ``a`` and one on ``b`` (the same inputs for the repeat axis)."""
    if origin is None or divergence is None or not ctx.hookable:
        return
    from samebits.measure.ops import first_op_difference, op_digests

    call = divergence.call
    ops_a = op_digests(ctx.model, a, call.name, call.call, rows_a)
    ops_b = op_digests(ctx.model, b, call.name, call.call, rows_b)
    origin.op = first_op_difference(ops_a, ops_b)


def keys_for(divergence: Divergence | None) -> set[str]:
    """The call keys whose tensors a second pass should keep: every call that differs (up to
    ``PROFILE_MODULES``; the trace keeps at most a byte budget of them), for the growth and the
    profile of the difference along the network."""
    if divergence is None:
        return set()
    differing = [c.key for c, differs in divergence.calls if differs] or [c.key for c in divergence.later]
    return {divergence.call.key, *differing[:PROFILE_MODULES]}
