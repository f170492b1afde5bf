"""The batch axis: one sample alone versus as a row of batches of every size, at the first and
last position, with random neighbours; neighbours are varied at the smallest and largest size."""

from __future__ import annotations

import time
from typing import Any

import torch

from samebits.check.context import CheckContext, keys_for, op_origin, origin_from
from samebits.check.report import AxisResult, Difference
from samebits.errors import first_line
from samebits.probe.batching import batch_size_of, output_rows, random_neighbour, stack_samples, take_sample
from samebits.probe.trace import first_divergence, plain_forward
from samebits.tensors.digest import digest_tree
from samebits.tensors.tree import RowError


def size_groups(sizes: list[int], keys: dict[int, str]) -> list[list[int]]:
    """Batch sizes grouped by identical result, in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for size in sizes:
        groups.setdefault(keys[size], []).append(size)
    return list(groups.values())


def format_groups(groups: list[list[int]], all_sizes: list[int]) -> str:
    """``{1} {2,3} {4..32}``: runs of consecutive sizes (in the tried list) written as a range."""
    order = {s: i for i, s in enumerate(all_sizes)}
    parts = []
    for group in groups:
        runs: list[list[int]] = []
        for s in group:
            if runs and order[s] == order[runs[-1][-1]] + 1:
                runs[-1].append(s)
            else:
                runs.append([s])
        text = ",".join(
            str(r[0]) if len(r) == 1 else f"{r[0]},{r[1]}" if len(r) == 2 else f"{r[0]}..{r[-1]}" for r in runs
        )
        parts.append("{" + text + "}")
    return " ".join(parts)


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
    gen = torch.Generator().manual_seed(ctx.options.seed + 1)
    sample = take_sample(ctx.inputs, 0, dim)
    alone, alone_trace, _ = ctx.forward(sample, rows=(1, 0))
    sizes = sorted({1, *ctx.options.batch_sizes})
    keys: dict[int, str] = {1: _key(alone)}
    position, neighbours, errors = [], [], []
    worst, first_bad, verdict = None, None, "identical"
    multi = [s for s in sizes if s > 1]
    for size in multi:
        ctx.progress(f"batch: size {size}")
        # One forward holds the sample at the first and the last position, random rows between.
        others = [random_neighbour(sample, gen, dim) for _ in range(size - 2)]
        try:
            first, last = _row_outputs(ctx, [sample, *others, sample], (0, size - 1), alone, size)
            if size in (multi[0], multi[-1]):  # neighbours: the same position with other rows
                fresh = [random_neighbour(sample, gen, dim) for _ in range(size - 1)]
                (other,) = _row_outputs(ctx, [sample, *fresh], (0,), alone, size)
                if _key(other) != _key(first):
                    neighbours.append(size)
        except RowError as exc:
            return AxisResult(
                "batch",
                "skipped",
                reason=f"outputs cannot be split per sample: {exc}; pass --batch-dim or skip this axis",
            )
        except Exception as exc:
            errors.append(f"size {size}: {first_line(exc, with_type=True)}")
            continue
        keys[size] = _key(first)
        if _key(last) != keys[size]:
            position.append(size)
        for view in (first, last):
            result = ctx.compare(alone, view)
            if result.identical:
                continue
            if first_bad is None:
                first_bad = size
            if worst is None or result.verdict == "diverged":
                worst = Difference.from_comparison(result)
            verdict = "diverged" if result.verdict == "diverged" or verdict == "diverged" else "close"
    tried = [s for s in sizes if s in keys]
    if len(tried) < 2:
        return AxisResult("batch", "error", reason="; ".join(errors) or "no batch size could run")
    groups = size_groups(tried, keys)
    agreed = sum(1 for s in tried if keys[s] == keys[1])
    result = AxisResult("batch", verdict, len(tried), agreed, difference=worst)
    result.details = {
        "sizes": tried,
        "groups": groups,
        "groups_text": format_groups(groups, tried),
        "position_matters": position,
        "neighbours_matter": neighbours,
        "errors": errors,
        "example_batch": n0,
    }
    if first_bad is not None and ctx.hookable and ctx.options.localize:
        others = [random_neighbour(sample, gen, dim) for _ in range(first_bad - 1)]
        batch = stack_samples([sample, *others], dim)
        _, batch_trace, _ = ctx.forward(batch, rows=(first_bad, 0))
        divergence = first_divergence(alone_trace, batch_trace)
        keep = keys_for(divergence)
        kept_alone = ctx.forward(sample, keep=keep, rows=(1, 0))[2]
        kept_batch = ctx.forward(batch, keep=keep, rows=(first_bad, 0))[2]
        result.origin = origin_from(divergence, kept_alone, kept_batch, ctx.compare_flat)
        op_origin(ctx, result.origin, divergence, sample, batch, (1, 0), (first_bad, 0))
        result.details["localized_at_size"] = first_bad
    if verdict == "identical":
        result.summary = f"a sample's output is identical alone and in batches of {', '.join(map(str, tried[1:]))}"
    else:
        result.summary = f"batch sizes that agree bit for bit: {result.details['groups_text']}"
        if position:
            result.summary += f"; position matters at {', '.join(map(str, position))}"
        if neighbours:
            result.summary += f"; neighbours matter at {', '.join(map(str, neighbours))}"
    if errors:
        result.reason = "; ".join(errors)
    result.seconds = time.monotonic() - start
    return result


def _key(output: Any) -> str:
    return repr(sorted(digest_tree(output).items()))


def _row_outputs(ctx: CheckContext, samples: list[Any], rows: tuple[int, ...], alone: Any, size: int) -> list[Any]:
    output = plain_forward(ctx.model, stack_samples(samples, ctx.options.batch_dim))
    return [output_rows(output, row, row + 1, size) for row in rows]
