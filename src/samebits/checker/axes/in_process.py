"""Axes that run in this process: repeat, seed and state."""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from samebits.checker.context import CheckContext, keys_for, op_origin, origin_from
from samebits.tensors.compare import Verdict, worst_verdict
from samebits.checker.report import AxisResult, Difference, ModuleRef, RngUse, SeedDetails, StateDetails
from samebits.determinism.rng import seed_rngs
from samebits.measure.trace import first_divergence
from samebits.tensors.digest import digest
from samebits.models.inputs import Model


def verdict_of(
    ctx: CheckContext, outputs: list[Any], traces: list[Any]
) -> tuple[Verdict, int, Difference | None, int | None]:
    """Compare every run with the first: (verdict, runs that agree bit for bit, worst difference,
    index of the first run that differs)."""
    agreed, first_bad = 1, None
    worst: Difference | None = None
    verdict: Verdict = "identical"
    for i in range(1, len(outputs)):
        if traces[i].outputs == traces[0].outputs:
            agreed += 1
            continue
        result = ctx.compare(outputs[0], outputs[i])
        if result.identical:  # digests of non-tensor leaves only
            agreed += 1
            continue
        first_bad = first_bad if first_bad is not None else i
        if result.verdict == "diverged" or worst is None:
            worst = Difference.from_comparison(result)
        verdict = worst_verdict((verdict, result.verdict))
    return verdict, agreed, worst, first_bad


def repeat_axis(ctx: CheckContext) -> AxisResult:
    """N forwards on the same inputs in one process, the global seed set once first."""
    start = time.monotonic()
    seed_rngs(ctx.options.seed)
    runs = [ctx.forward() for _ in range(ctx.options.runs)]
    outputs, traces = [r[0] for r in runs], [r[1] for r in runs]
    verdict, agreed, diff, bad = verdict_of(ctx, outputs, traces)
    result = AxisResult("repeat", verdict, len(runs), agreed, difference=diff)
    if bad is not None and ctx.localizes:
        # The same sequence of calls again, now with hooks; then once more keeping tensors.
        seed_rngs(ctx.options.seed)
        hooked = [ctx.traced()[1] for _ in range(bad + 1)]
        divergence = first_divergence(hooked[0], hooked[bad])
        seed_rngs(ctx.options.seed)
        keep = keys_for(divergence)
        kept = [ctx.traced(keep=keep)[2] for _ in range(bad + 1)]
        result.origin = origin_from(divergence, kept[0], kept[bad], ctx.compare_flat)
        seed_rngs(ctx.options.seed)
        op_origin(ctx, result.origin, divergence, ctx.inputs, ctx.inputs)
    result.summary = (
        f"{agreed}/{len(runs)} runs identical"
        if verdict != "close"
        else f"{agreed}/{len(runs)} runs bit-identical, all within tolerance"
    )
    result.seconds = time.monotonic() - start
    return result


def rng_digests() -> dict[str, str]:
    """Short digests of the three global RNG states."""
    return {
        "torch": digest(torch.get_rng_state())[:16],
        "numpy": hashlib.sha256(repr(np.random.get_state()).encode()).hexdigest()[:16],
        "random": hashlib.sha256(repr(random.getstate()).encode()).hexdigest()[:16],
    }


def rng_consumers(model: Model, run: Any) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """Run ``run()`` and find who draws from which RNG: (RNGs whose state changed, and
    ``(module, type, rngs)`` for modules whose own code drew, not only their children)."""
    found: list[tuple[str, str, list[str]]] = []
    stack: list[list[Any]] = []
    handles = []
    if isinstance(model, nn.Module) and not isinstance(model, torch.jit.ScriptModule):

        def pre(module: nn.Module, args: Any) -> None:
            stack.append([rng_digests(), set()])

        def post(name: str):
            def hook(module: nn.Module, args: Any, output: object) -> None:
                before, by_children = stack.pop()
                after = rng_digests()
                changed = {k for k in after if after[k] != before[k]}
                own = sorted(changed - by_children)
                if changed and stack:
                    stack[-1][1].update(changed)
                if own:
                    found.append((name or "<model>", type(module).__name__, own))

            return hook

        for name, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post(name)))
    before = rng_digests()
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    after = rng_digests()
    return [k for k in after if after[k] != before[k]], found


def rngs_drawn(run: Any) -> list[str]:
    """The global RNGs whose state ``run()`` changed."""
    before = rng_digests()
    run()
    after = rng_digests()
    return [k for k in after if after[k] != before[k]]


def seed_axis(ctx: CheckContext) -> AxisResult:
    """Every RNG re-seeded with a different seed before each forward."""
    start = time.monotonic()
    seeds = [(ctx.options.seed + 1 + 7919 * r) % 2**32 for r in range(max(2, ctx.options.runs))]
    outputs, traces = [], []
    for s in seeds:
        seed_rngs(s)
        out, trace = ctx.forward()
        outputs.append(out)
        traces.append(trace)
    verdict, agreed, diff, bad = verdict_of(ctx, outputs, traces)
    result = AxisResult("seed", verdict, len(outputs), agreed, difference=diff)
    seed_rngs(ctx.options.seed)
    rngs = rngs_drawn(lambda: ctx.forward())
    modules: list[tuple[str, str, list[str]]] = []
    if rngs:  # who draws: per-module hooks only for a forward that draws at all
        seed_rngs(ctx.options.seed)
        rngs, modules = rng_consumers(ctx.model, lambda: ctx.forward())
    result.details = SeedDetails(rngs, [RngUse(m, t, r) for m, t, r in modules])
    if bad is not None and ctx.localizes:
        hooked = []
        for s in (seeds[0], seeds[bad]):
            seed_rngs(s)
            hooked.append(ctx.traced()[1])
        result.origin = origin_from(first_divergence(*hooked))
    if verdict == "identical":
        result.summary = f"{agreed}/{len(outputs)} seeds give identical outputs" + (
            f" (the forward draws from {', '.join(rngs)} without effect)" if rngs else ""
        )
    else:
        who = ", ".join(f"{m} ({t})" for m, t, _ in modules) or "code hooks cannot see"
        result.summary = f"outputs depend on the seed: the forward draws from {', '.join(rngs) or 'an RNG'} in {who}"
    result.seconds = time.monotonic() - start
    return result


def state_digests(model: Model) -> dict[str, str]:
    if not isinstance(model, nn.Module):
        return {}
    tensors: dict[str, torch.Tensor] = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    return {name: digest(t) for name, t in tensors.items()}


def changed_tensors(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The parameters and buffers whose digests differ (or that appeared) between two snapshots."""
    return sorted(n for n in before if after.get(n) != before[n]) + sorted(n for n in after if n not in before)


def state_axis(ctx: CheckContext) -> AxisResult:
    """Digests of every parameter and buffer before and after one forward, and what the check's
    first forward changed (measured from the model as loaded: a model that rescales its weights
    on first use, as RWKV does in eval, changes nothing later)."""
    start = time.monotonic()
    if not isinstance(ctx.module, nn.Module):
        return AxisResult(
            "state", "skipped", reason="the model has no parameters or buffers that samebits can see (not an nn.Module)"
        )
    before = state_digests(ctx.module)
    seed_rngs(ctx.options.seed)
    ctx.forward()
    later = changed_tensors(before, state_digests(ctx.module))
    first = [n for n in ctx.first_forward_changed if n not in later]
    changed = sorted([*first, *later])
    owners = dict.fromkeys(n.rpartition(".")[0] or "<model>" for n in changed)
    types = {name or "<model>": type(m).__name__ for name, m in ctx.module.named_modules()}
    result = AxisResult("state", "diverged" if changed else "identical", 1, 0 if changed else 1)
    result.details = StateDetails(changed, [ModuleRef(m, types.get(m, "?")) for m in owners], bool(first and not later))
    where = ", ".join(f"{m} ({types.get(m, chr(63))})" for m in owners)
    if not changed:
        result.summary = f"{len(before)} parameters and buffers unchanged by the first forward and by a later one"
    elif first and not later:
        shown = ", ".join(first[:3]) + (" ..." if len(first) > 3 else "")
        result.summary = f"the first forward changed {len(first)} tensors of {where} ({shown}); later forwards do not"
    else:
        result.summary = f"a forward changed {len(changed)} tensors of {where}"
    result.seconds = time.monotonic() - start
    return result
