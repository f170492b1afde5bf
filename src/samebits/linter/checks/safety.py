"""SB401 unsafe-torch-load, SB402 pickle-load."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import FileContext, Finding


def _targets_old_torch(ctx: FileContext) -> bool:
    """In-file evidence of torch < 0.4: ``Variable`` imported or called, ``volatile=`` passed."""
    return any(name.endswith("autograd.Variable") for name in ctx.aliases.values()) or any(
        k.arg == "volatile" for c in ctx.calls for k in c.keywords
    )


def unsafe_torch_load(ctx: FileContext) -> Iterator[Finding]:
    old = None
    for call in ctx.calls:
        if ctx.dotted(call.func) != "torch.load":
            continue
        weights_only = next((k.value for k in call.keywords if k.arg == "weights_only"), None)
        if isinstance(weights_only, ast.Constant) and weights_only.value is False:
            yield ctx.finding(call, "SB401", "torch.load(..., weights_only=False) unpickles whatever the file holds")
            continue
        if weights_only is not None or any(k.arg is None for k in call.keywords):
            continue
        old = _targets_old_torch(ctx) if old is None else old
        if old:
            yield ctx.finding(
                call,
                "SB401",
                "bare torch.load in code written for torch < 0.4 (Variable, volatile=), where the default unpickles anything; pass weights_only=True",
            )
        elif ctx.project_min_torch is not None and ctx.project_min_torch < (2, 6):
            low = ".".join(map(str, ctx.project_min_torch))
            yield ctx.finding(
                call,
                "SB401",
                f"bare torch.load: this project supports torch {low}, where the default unpickles anything; pass weights_only=True",
            )


def pickle_load(ctx: FileContext) -> Iterator[Finding]:
    for call in ctx.calls:
        name = ctx.dotted(call.func) or ""
        if name in (
            "pickle.load",
            "pickle.loads",
            "dill.load",
            "dill.loads",
            "joblib.load",
            "cloudpickle.load",
            "cloudpickle.loads",
        ):
            yield ctx.finding(call, "SB402", f"{name} runs the code inside the data it loads")


CHECKS = (("SB401", unsafe_torch_load), ("SB402", pickle_load))
