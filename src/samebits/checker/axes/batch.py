"""The batch axis: one sample alone versus as a row of batches of every size, at the first,
middle and last position, with random neighbours (``measure.invariance``). Each size is one
forward; other neighbours are tried once more at the smallest size only (a second forward at the
largest cost as much as all the small sizes together)."""

from __future__ import annotations

import time

import torch

from samebits.models.inputs import ModelInputs

from samebits.checker.context import CheckContext, keys_for, op_origin, origin_from
from samebits.tensors.compare import Verdict, worst_verdict
from samebits.checker.report import AxisResult, BatchDetails, Difference
from samebits.measure.batching import batch_size_of, random_neighbour, stack_samples, take_sample
from samebits.measure.invariance import coupled_rows, format_groups, measure_batch_invariance
from samebits.measure.ops import first_op_difference, op_digests
from samebits.measure.trace import first_divergence, plain_forward
from samebits.tensors.tree import RowError


def batch_axis(ctx: CheckContext) -> AxisResult:
    start = time.monotonic()
    dim = ctx.options.batch_dim
    n0 = batch_size_of(ctx.inputs, dim)
    if n0 is None:
        return AxisResult(
            "batch",
            "skipped",
            reason=f"the inputs have no batch dimension {dim} (no tensor argument with that dim, no list of tensors)",
        )
    sample = take_sample(ctx.inputs, 0, dim)
    sizes = sorted({1, *ctx.options.batch_sizes})
    try:
        measured = measure_batch_invariance(
            lambda batch: plain_forward(ctx.model, batch),
            sample,
            sizes,
            seed=ctx.options.seed + 1,
            dim=dim,
            neighbours_at=None,  # other neighbours at every size: routing shows at some, not at all
            progress=lambda m: ctx.progress(f"batch: {m}"),
        )
    except RowError as exc:
        return AxisResult(
            "batch", "skipped", reason=f"outputs cannot be split per sample: {exc} (or leave the batch axis out)"
        )
    failed = measured.at(1).error
    if failed:
        return AxisResult("batch", "error", reason=failed)
    alone = measured.at(1).rows[0]
    tried = [s.size for s in measured.measured]
    if len(tried) < 2:
        return AxisResult("batch", "error", reason="; ".join(measured.errors) or "no batch size could run")
    worst: Difference | None = None
    first_bad: int | None = None
    verdict: Verdict = "identical"
    for entry in measured.measured[1:]:
        for view in entry.rows.values():
            compared = ctx.compare(alone, view)
            if compared.identical:
                continue
            first_bad = first_bad or entry.size
            if worst is None or compared.verdict == "diverged":
                worst = Difference.from_comparison(compared)
            verdict = worst_verdict((verdict, compared.verdict))
    groups = measured.groups()
    agreed = sum(1 for s in measured.measured if s.key == measured.at(1).key)
    result = AxisResult("batch", verdict, len(tried), agreed, difference=worst)
    position, neighbours = measured.position_matters, measured.neighbours_matter
    coupled = (
        coupled_rows(lambda batch: plain_forward(ctx.model, batch), sample, seed=ctx.options.seed + 3, dim=dim)
        if first_bad is not None
        else None
    )
    result.details = BatchDetails(
        tried, groups, format_groups(groups, tried), position, neighbours, measured.errors, n0, coupled=coupled
    )
    if first_bad is not None and ctx.localizes:
        gen = torch.Generator().manual_seed(ctx.options.seed + 2)
        others = [random_neighbour(sample, gen, dim) for _ in range(first_bad - 1)]
        batch = stack_samples([sample, *others], dim)
        _, alone_trace, _ = ctx.traced(sample, rows=(1, 0))
        _, batch_trace, _ = ctx.traced(batch, rows=(first_bad, 0))
        divergence = first_divergence(alone_trace, batch_trace)
        keep = keys_for(divergence)
        kept_alone = ctx.traced(sample, keep=keep, rows=(1, 0))[2]
        kept_batch = ctx.traced(batch, keep=keep, rows=(first_bad, 0))[2]
        result.origin = origin_from(divergence, kept_alone, kept_batch, ctx.compare_flat)
        op_origin(ctx, result.origin, divergence, sample, batch, (1, 0), (first_bad, 0))
        result.details.localized_at_size = first_bad
    if neighbours and ctx.localizes:
        result.details.coupling_op = coupling_op(ctx, sample, neighbours[0])
    result.summary = measured.summary()
    if measured.errors:
        result.reason = "; ".join(measured.errors)
    result.seconds = time.monotonic() - start
    return result


def coupling_op(ctx: CheckContext, sample: ModelInputs, size: int) -> str | None:
    """Where a row first takes its neighbours' values: two batches of ``size`` with the sample
    first and other neighbours, the first module whose row differs from the same row of inputs,
    and the first op inside it that does (``"aten.sort in layers.0.mlp.experts"``); ``None``
    where these neighbours happen to give the row the same bits, or ops cannot be seen."""
    gen = torch.Generator().manual_seed(ctx.options.seed + 4)
    dim = ctx.options.batch_dim
    a, b = (stack_samples([sample, *(random_neighbour(sample, gen, dim) for _ in range(size - 1))], dim) for _ in "ab")
    divergence = first_divergence(ctx.traced(a, rows=(size, 0))[1], ctx.traced(b, rows=(size, 0))[1])
    if divergence is None or not divergence.inputs_identical:
        return None
    call = divergence.call
    ops = [op_digests(ctx.model, batch, call.name, call.call, (size, 0)) for batch in (a, b)]
    op = first_op_difference(ops[0], ops[1], coupling=True)
    return f"{op.split(' (')[0] if op else 'its forward'} in {call.label} ({call.type})"
