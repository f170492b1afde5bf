"""SB104 dataloader-workers-unseeded, SB106 seed-after-model."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import RANDOM_TENSOR, SEED_CALLS, FileContext, Finding, loads_in_main_process
from samebits.linter.checks.models import PRETRAINED, same_scope, source_of_call


def dataloader_workers_unseeded(ctx: FileContext) -> Iterator[Finding]:
    if not ctx.seeds_rngs():
        return
    for call in ctx.calls:
        name = ctx.dotted(call.func) or ""
        if not (name == "DataLoader" or name.endswith(".DataLoader")):
            continue
        keywords = {k.arg: k.value for k in call.keywords}
        if None in keywords:  # **kwargs: cannot tell
            continue
        if loads_in_main_process(call):
            continue
        if "worker_init_fn" not in keywords and "generator" not in keywords:
            # either one is the worker seeding handled: a seeded generator fixes each worker's base
            # seed (torch >= 1.9 seeds torch, random and NumPy in each worker from it), a
            # worker_init_fn seeds them itself from the loader's seed
            yield ctx.finding(
                call,
                "SB104",
                "DataLoader with worker processes but neither worker_init_fn nor generator, in a file that seeds RNGs",
            )


def _is_seed(ctx: FileContext, call: ast.Call) -> bool:
    """A call that seeds a global RNG (a ``torch.Generator``'s own ``manual_seed`` does not)."""
    name = ctx.dotted(call.func) or ""
    return name in SEED_CALLS or name.endswith("seed_everything")


def _creates(ctx: FileContext, call: ast.Call) -> str | None:
    name = ctx.dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    if any(k.arg == "generator" for k in call.keywords):
        return None  # drawn from its own generator, not the global RNG
    if (
        name in RANDOM_TENSOR
        or name.startswith("numpy.random.")
        and last not in ("seed", "default_rng", "RandomState", "Generator", "get_state", "set_state")
    ):
        return f"random values ({name})"
    source = source_of_call(ctx, call)
    if source is not None and source.train is not None and source != PRETRAINED:  # built here, fresh weights
        return f"a model ({last})"
    return None


def seed_after_model(ctx: FileContext) -> Iterator[Finding]:
    scopes = [ctx.tree] + [n for n in ctx.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        created: tuple[int, str] | None = None
        for stmt in scope.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            calls = sorted(
                (n for n in same_scope(stmt) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
            )
            for node in calls:
                if _is_seed(ctx, node) and created is not None:
                    yield ctx.finding(
                        node,
                        "SB106",
                        f"RNGs seeded after {created[1]} was created at line {created[0]}: it came from an unseeded RNG",
                    )
                    return
                what = _creates(ctx, node)
                if what and created is None:
                    created = (node.lineno, what)


CHECKS = (("SB104", dataloader_workers_unseeded), ("SB106", seed_after_model))
