"""Causes of the differences ``check --generate`` finds, each measured by a controlled re-run:
the module where that step's forward first differs is re-run alone (``generation_site``); whole
generations are re-run with one factor changed at a time (the batch's rows without its padding,
its padding without its rows, the batch's shape with only copies of the prompt, the padding on
the other side); and the fix is named, verified where a re-run can show it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from samebits.checker.generation_site import ModuleRerun, Site, rerun_module
from samebits.checker.report import Cause
from samebits.rules.causes import fix_of
from samebits.models.inputs import Model


@dataclasses.dataclass
class Ctx:
    """What the causes re-run: the model, the generator (``measure.generate.Generator``), the
    prompts, each prompt's reference (tokens, scores) and the check's options."""

    model: Model
    generate: Any
    prompts: list[torch.Tensor]
    reference: list[tuple[torch.Tensor, torch.Tensor]]
    padding: int
    with_other_attention: Callable[[Any, Any], Any]
    at_one_thread: Callable[[Any], Any]


def _same_generation(x: tuple[torch.Tensor, torch.Tensor], y: tuple[torch.Tensor, torch.Tensor]) -> bool:
    return torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])


def _differs(flag: bool) -> str:
    return "differs" if flag else "keeps the reference's bits"


def _module_part(
    ctx: Ctx, site: Site, condition: Any = None, condition_text: str = ""
) -> tuple[str, ModuleRerun | None]:
    """The module re-run and its evidence; none where the module's own inputs differed (the
    difference began in code between modules: re-running it would only show that other inputs
    give other bits)."""
    if site.module is None or not isinstance(ctx.model, torch.nn.Module):
        return "", None
    if not site.inputs_identical and condition is None:
        return "", None
    rerun = rerun_module(ctx.model, site, condition, condition_text)
    return "; " + rerun.text(site.label), rerun


def batch_cause(ctx: Ctx, site: Site) -> Cause:
    """The batch's two factors re-run one at a time (its rows, its padding), then its shape with
    only copies of the prompt: equal to the batch's bits when shape alone decides them."""
    gen, p = ctx.generate, ctx.prompts[site.prompt]
    rows, width = len(ctx.prompts), max(len(q) for q in ctx.prompts)
    ref = ctx.reference[site.prompt]
    padded = gen([p], extra=width - len(p))[0]
    copies = gen([p] * rows)[0]
    tile = observed(ctx.model, lambda: gen([p] * rows, extra=width - len(p)))
    in_batch = observed(ctx.model, site.other[0])
    by_rows, by_padding = not _same_generation(copies, ref), not _same_generation(padded, ref)
    shape_decides = _same_generation(tile.output[0], in_batch.output[site.prompt])
    masks = (tile.mask, in_batch.mask)
    by_mask = not shape_decides and (masks[0] is None) != (masks[1] is None)
    side = gen.side
    factors = [f for f, on in (("the number of rows", by_rows), (f"the {side} padding", by_padding)) if on]
    if by_mask:
        factors.append("whether any prompt in the batch is padded (its layers then get an attention mask)")
    elif not shape_decides:
        factors.append("the other prompts in it")
    factors = factors or ["its rows and its padding together"]
    summary = f"a prompt's generation depends on the batch it runs in: {', '.join(factors)}" + site.start
    module_text, _ = _module_part(ctx, site)
    evidence = (
        f"at {site.where}; the prompt alone, {side}-padded to the batch's width ({width}): {_differs(by_padding)}; "
        f"{rows} copies of it, unpadded: {_differs(by_rows)}; {rows} copies at the batch's width "
        + ("give exactly its bits inside the batch" if shape_decides else "still differ from its bits inside the batch")
        + (
            f" (the layers' attention mask: {masks[1] or 'none'} inside the batch, {masks[0] or 'none'} among the copies)"
            if by_mask
            else ""
        )
        + module_text
    )
    code = "batch-size" if by_rows else "padding" if by_padding else "batch-composition"
    fix = fix_of(code, None if code == "batch-composition" else "generate")
    return Cause(code, "batch", summary, evidence, fix, verified=True if shape_decides else None)


@dataclasses.dataclass
class Observed:
    """One run of a generation, with what its forwards received: the model's ``position_ids``
    per forward, and the attention mask its layers got in the first forward (the first module
    given a 4-D mask or none, not the 2-D padding mask the model takes): ``None`` when they got
    none (transformers drops a mask that masks nothing), else its dtype and shape."""

    output: Any
    position_ids: list[Any]
    mask: str | None

    def positions(self, step: int, n: int, row: int) -> torch.Tensor | None:
        """The position ids of forward ``step`` at row ``row`` of ``n``, where they were passed."""
        ids = self.position_ids[step] if step < len(self.position_ids) else None
        return ids[row] if isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[0] == n else None


def observed(model: Model, run: Callable[[], Any]) -> Observed:
    """``run()`` once, watched (nothing is watched in a model that is not an ``nn.Module``)."""
    if not isinstance(model, torch.nn.Module):
        return Observed(run(), [], None)
    positions: list[Any] = []
    masks: list[Any] = []

    def top(mod: Any, args: Any, kwargs: Any) -> None:
        positions.append(kwargs.get("position_ids"))

    def inner(mod: Any, args: Any, kwargs: Any) -> None:
        mask = kwargs.get("attention_mask", 0)
        if not masks and (mask is None or (isinstance(mask, torch.Tensor) and mask.dim() == 4)):
            masks.append(None if mask is None else f"{str(mask.dtype).removeprefix('torch.')} {list(mask.shape)}")

    handles = [model.register_forward_pre_hook(top, with_kwargs=True)]
    handles += [m.register_forward_pre_hook(inner, with_kwargs=True) for name, m in model.named_modules() if name]
    try:
        output = run()
    finally:
        for handle in handles:
            handle.remove()
    return Observed(output, positions, masks[0] if masks else None)


def _score_gap(x: tuple[torch.Tensor, torch.Tensor], y: tuple[torch.Tensor, torch.Tensor]) -> float | None:
    """The largest score difference between two generations (finite scores), ``None`` for the
    same bits."""
    if _same_generation(x, y):
        return None
    if not torch.equal(x[0], y[0]) or x[1].shape != y[1].shape:
        return float("inf")  # other tokens: the scores after them are not comparable
    diff = (x[1] - y[1]).abs()
    finite = diff[torch.isfinite(diff)]
    return float(finite.max()) if finite.numel() else 0.0


def _gap_text(gap: float | None) -> str:
    if gap is None:
        return "keeps the reference's bits"
    return "other tokens" if gap == float("inf") else f"scores differ by up to {gap:.2g}"


def _other_side(ctx: Ctx, site: Site) -> tuple[str, float | None, float | None] | None:
    """An encoder-decoder's prompt padded by the same amount on each side, re-run: (the other
    side, the score gap on the check's side, on the other side). ``None`` for a decoder-only
    model, whose new tokens must follow the prompt (no right padding to compare)."""
    gen = ctx.generate
    if not getattr(getattr(ctx.model, "config", None), "is_encoder_decoder", False):
        return None
    p, ref = ctx.prompts[site.prompt], ctx.reference[site.prompt]
    other = "left" if gen.side == "right" else "right"
    here = _score_gap(gen([p], extra=ctx.padding)[0], ref)
    there = _score_gap(gen([p], extra=ctx.padding, side=other)[0], ref)
    return other, here, there


def _numbers_padding(side: str, here: float | None, there: float | None) -> bool:
    """Left padding moves the prompt's positions and right padding by the same amount does not
    (its bits, or a score gap at least 10x smaller): the model numbers the padding positions."""
    return side == "left" and here is not None and (there is None or there * 10 <= here)


def padding_cause(ctx: Ctx, site: Site) -> Cause:
    p, side = ctx.prompts[site.prompt], ctx.generate.side
    runs = (observed(ctx.model, site.reference[0]), observed(ctx.model, site.other[0]))
    alone, padded = (r.positions(site.step, n, row) for r, (_, n, row) in zip(runs, (site.reference, site.other)))
    if alone is None or padded is None:
        positions = "the model's forward gets no position_ids (not compared)"
        shifted = False
    else:
        real = padded[-len(alone) :] if side == "left" else padded[: len(alone)]
        shifted = not torch.equal(real, alone)
        positions = (
            f"the prompt's position ids {'shift' if shifted else 'stay the same'} with the padding "
            f"({alone.tolist()[:6]}{'...' if len(alone) > 6 else ''} alone)"
        )
    sides = _other_side(ctx, site)
    numbered = False
    if sides is not None:
        other, here, there = sides
        numbered = _numbers_padding(side, here, there)
        positions += (
            f"; {ctx.padding} pad tokens on the {side}: {_gap_text(here)}; "
            f"re-run with them on the {other}: {_gap_text(there)}"
        )
        if _numbers_padding(other, there, here):
            positions += f" (the model numbers the padding positions: keep padding on the {side})"
    if runs[0].mask != runs[1].mask:
        positions += f"; the layers' attention mask: {runs[0].mask or 'none'} alone, {runs[1].mask or 'none'} padded"
    module_text, rerun = _module_part(ctx, site)
    if shifted:
        summary = "left padding shifts the prompt's positions"
    elif numbered:
        summary = (
            "left padding moves the prompt's positions: the model numbers the padding positions (its "
            "position embeddings count from the sequence's start, not from the attention mask)"
        )
    elif rerun is not None and rerun.rows:
        a, b = rerun.rows
        summary = (
            f"{side} padding changes the row count of the prompt's calls ({a} vs {b} rows into {site.label}), "
            "and that module gives a row other bits at other row counts"
        )
    else:
        summary = (
            f"{side} padding lengthens the sequence the prompt's {len(p)} tokens run in to {len(p) + ctx.padding}: "
            "other kernel shapes, masked positions included"
        )
    fix = fix_of("padding", "positions" if shifted else "right" if numbered else None)
    return Cause("padding", "padding", summary + site.start, f"at {site.where}; {positions}{module_text}", fix)


def cache_cause(ctx: Ctx, site: Site) -> Cause:
    summary = (
        "the KV-cache path and the recompute path compute other bits: with the cache a decode step runs "
        "one position per row, without it the whole sequence"
    ) + site.start
    fix = fix_of("cache-path")
    return Cause("cache-path", "cache", summary, f"at {site.where}" + _module_part(ctx, site)[0], fix)


def attention_cause(ctx: Ctx, site: Site) -> Cause:
    summary = "eager and sdpa attention compute other bits" + site.start
    condition = lambda run: ctx.with_other_attention(ctx.model, run)  # noqa: E731
    fix = fix_of("attention-implementation")
    evidence = f"at {site.where}" + _module_part(ctx, site, condition, "with the other attention implementation")[0]
    return Cause("attention-implementation", "attention", summary, evidence, fix)


def threads_cause(ctx: Ctx, site: Site) -> Cause:
    summary = "the generation depends on the intra-op thread count" + site.start
    fix = fix_of("thread-count")
    evidence = f"at {site.where}" + _module_part(ctx, site, ctx.at_one_thread, "at one thread")[0]
    return Cause("thread-count", "threads", summary, evidence, fix)


def repeat_cause(ctx: Ctx, site: Site) -> Cause:
    from samebits.determinism import deterministic

    with deterministic():
        first = [ctx.generate([p])[0] for p in ctx.prompts]
        again = [ctx.generate([p])[0] for p in ctx.prompts]
    fixed = all(_same_generation(x, y) for x, y in zip(first, again))
    summary = "the same prompt generates other bits when generated again in one process" + site.start
    again_text = _module_part(ctx, site, lambda run: run(), "again")[0]  # the module twice on the same inputs
    evidence = (
        f"at {site.where}; inside samebits.deterministic() two generations of every prompt "
        f"{'agree' if fixed else 'still differ'}{again_text}"
    )
    fix = fix_of("nondeterministic-kernels", None if fixed else "unfixed")
    return Cause("nondeterministic-kernels", "repeat", summary, evidence, fix, verified=fixed)


def process_cause(site_text: str) -> Cause:
    return Cause(
        "per-process",
        "process",
        "each fresh interpreter generates other bits",
        site_text,
        fix_of("per-process"),
    )


EXPLAIN = {
    "batch": batch_cause,
    "padding": padding_cause,
    "cache": cache_cause,
    "attention": attention_cause,
    "threads": threads_cause,
    "repeat": repeat_cause,
}
