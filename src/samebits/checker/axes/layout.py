"""The layout axis: the same forward with the model's parameters and its inputs re-laid in memory
(``measure.layout``: fresh aligned storage, an offset from an aligned address, transposed
strides), values unchanged, compared bit for bit with the model as given. Where bits change: the
first module, and whether :func:`samebits.tensors.layout.align_parameters` gives them back."""

from __future__ import annotations

import time
from typing import Any

import torch

from samebits.checker.context import CheckContext, keys_for, origin_from
from samebits.checker.report import AxisResult, Difference, LayoutDetails, Origin
from samebits.determinism.rng import seed_rngs
from samebits.errors import first_line
from samebits.measure.layout import LAYOUTS, Layout, LayoutTried, layout_of, never_in
from samebits.measure.ops import first_op_difference, op_digests
from samebits.measure.trace import Trace, first_divergence
from samebits.tensors.compare import Verdict, worst_verdict
from samebits.tensors.layout import align_parameters, relaid


def _skip_reason(ctx: CheckContext, layout: Layout) -> str:
    if layout.on == "inputs":
        return ""
    if not isinstance(ctx.module, torch.nn.Module):
        return "the model is not an nn.Module: no parameters to re-lay"
    if ctx.options.runtime:
        return "the runtime may hold its own copy of the weights (an exported graph); check without --runtime"
    return ""


def _run(ctx: CheckContext, layout: Layout) -> tuple[Any, Trace]:
    with layout.applied(ctx.module, ctx.inputs) as inputs:
        seed_rngs(ctx.options.seed)
        return ctx.forward(inputs)


def layout_axis(ctx: CheckContext) -> AxisResult:
    """The model as given twice (the reference must repeat), then once per layout."""
    start = time.monotonic()
    seed_rngs(ctx.options.seed)
    reference, ref_trace = ctx.forward()
    seed_rngs(ctx.options.seed)
    again, again_trace = ctx.forward()
    if again_trace.outputs != ref_trace.outputs and not ctx.compare(reference, again).identical:
        return AxisResult(
            "layout",
            "skipped",
            reason="two forwards as given already differ (see repeat): layouts cannot be told apart",
        )
    tried: list[LayoutTried] = []
    verdict: Verdict = "identical"
    worst: Difference | None = None
    first_bad: Layout | None = None
    for layout in LAYOUTS:
        skip = _skip_reason(ctx, layout)
        if skip:
            tried.append(LayoutTried(layout.name, layout.what, "skipped", skip))
            continue
        ctx.progress(f"layout: {layout.name}")
        try:
            output, trace = _run(ctx, layout)
        except Exception as exc:  # a model that needs contiguous weights, say: that layout cannot run
            tried.append(LayoutTried(layout.name, layout.what, "error", first_line(exc, with_type=True)))
            continue
        compared = ctx.compare(reference, output)
        note = "" if compared.identical else (compared.first_difference() or compared.items[0]).brief()
        counts = compared.identical or not never_in(layout, ctx.module)
        tried.append(LayoutTried(layout.name, layout.what, compared.verdict, note, counts))
        if compared.identical or not counts:
            continue
        if worst is None or (compared.verdict == "diverged" and verdict != "diverged"):
            worst = Difference.from_comparison(compared)
        first_bad = first_bad or layout
        verdict = worst_verdict((verdict, compared.verdict))
    ran = [t for t in tried if t.verdict in ("identical", "close", "diverged") and t.counts]
    sensitive = [t.name for t in tried if not t.counts]
    if not ran:
        return AxisResult("layout", "error", reason="; ".join(f"{t.name}: {t.note}" for t in tried))
    agreed = sum(1 for t in ran if t.verdict == "identical")
    result = AxisResult("layout", verdict, len(ran), agreed, difference=worst)
    given = layout_of(ctx.module) if isinstance(ctx.module, torch.nn.Module) else ""
    result.details = LayoutDetails(tried, given)
    if first_bad is not None:
        if first_bad.on == "parameters":
            differing = [t for t in tried if t.verdict in ("close", "diverged") and t.counts]
            result.details.aligned_fixes = _aligned_fixes(ctx, differing)
        if ctx.localizes:
            result.origin = _localize(ctx, first_bad)
    differ = [t.name for t in ran if t.verdict != "identical"]
    skipped = [t for t in tried if t.verdict == "skipped"]
    result.summary = (
        f"{agreed}/{len(ran)} layouts give the model's bits"
        + (f"; {', '.join(differ)} differ" if differ else f" ({', '.join(t.name for t in ran)})")
        + (f"; {len(skipped)} skipped: {skipped[0].note}" if skipped else "")
        + (
            f"; {', '.join(sensitive)} differ too, which this model never is (all its parameters are contiguous):"
            " sensitivity only"
            if sensitive
            else ""
        )
    )
    result.seconds = time.monotonic() - start
    return result


def _aligned_fixes(ctx: CheckContext, differing: list[LayoutTried]) -> bool:
    """The fix re-run: each parameter layout that differed, then ``align_parameters`` on it: True
    when every one gives the bits of the parameters in fresh aligned storage."""
    layouts = {layout.name: layout for layout in LAYOUTS}
    aligned = _run(ctx, layouts["parameters aligned"])[0]
    for tried in differing:
        layout = layouts[tried.name]
        if layout.on != "parameters":
            continue
        with relaid(ctx.module, layout.relay):
            align_parameters(ctx.module)
            seed_rngs(ctx.options.seed)
            output = ctx.forward()[0]
        if not ctx.compare(aligned, output).identical:
            return False
    return True


def _localize(ctx: CheckContext, layout: Layout) -> Origin | None:
    """Traces as given and under ``layout``, then their tensors and ops where they start."""

    def traced(relay: bool, keep: set[str] | None = None) -> tuple[Any, Trace, dict[str, Any]]:
        seed_rngs(ctx.options.seed)
        if not relay:
            return ctx.traced(keep=keep)
        with layout.applied(ctx.module, ctx.inputs) as inputs:
            return ctx.traced(inputs, keep=keep)

    divergence = first_divergence(traced(False)[1], traced(True)[1])
    if divergence is None:
        return None
    keep = keys_for(divergence)
    origin = origin_from(divergence, traced(False, keep)[2], traced(True, keep)[2], ctx.compare_flat)
    if origin is not None:
        call = divergence.call
        mine = op_digests(ctx.model, ctx.inputs, call.name, call.call)
        with layout.applied(ctx.module, ctx.inputs) as inputs:
            theirs = op_digests(ctx.model, inputs, call.name, call.call)
        origin.op = first_op_difference(mine, theirs)
    return origin
