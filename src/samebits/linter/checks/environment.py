"""SB101 hashseed-in-process, SB105 cublas-config-late: environment variables set too late."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import FileContext, Finding


def env_writes(ctx: FileContext, var: str) -> Iterator[ast.stmt | ast.expr]:
    """Nodes that set ``var`` in this process's environment."""
    for node in ctx.nodes:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and ctx.dotted(t.value) == "os.environ" and _const(t.slice) == var:
                    yield node
        elif isinstance(node, ast.Call):
            name = ctx.dotted(node.func)
            if (
                name in ("os.environ.setdefault", "os.putenv", "os.environ.__setitem__")
                and node.args
                and _const(node.args[0]) == var
            ):
                yield node
            elif name == "os.environ.update" and node.args and isinstance(node.args[0], ast.Dict):
                if any(_const(k) == var for k in node.args[0].keys if k is not None):
                    yield node
            elif name == "os.environ.update" and any(k.arg == var for k in node.keywords):
                yield node


def _const(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def hashseed_in_process(ctx: FileContext) -> Iterator[Finding]:
    for node in env_writes(ctx, "PYTHONHASHSEED"):
        yield ctx.finding(node, "SB101")


def _cuda_use(ctx: FileContext, node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = ctx.dotted(node.func) or ""
        if name.endswith(".cuda") or (
            name.startswith("torch.cuda.") and not name.endswith(("is_available", "device_count"))
        ):
            return True
        if name.endswith(".to") and any(
            isinstance(a, ast.Constant) and str(a.value).startswith("cuda") for a in node.args
        ):
            return True
        if any(
            k.arg == "device" and isinstance(k.value, ast.Constant) and str(k.value.value).startswith("cuda")
            for k in node.keywords
        ):
            return True
        if (
            name == "torch.device"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("cuda")
        ):
            return True
    return False


def cublas_config_late(ctx: FileContext) -> Iterator[Finding]:
    writes = list(env_writes(ctx, "CUBLAS_WORKSPACE_CONFIG"))
    if not writes:
        return
    uses = sorted(getattr(n, "lineno", 0) for n in ctx.nodes if _cuda_use(ctx, n))
    for node in writes:
        earlier = [line for line in uses if line < node.lineno]
        if earlier:
            yield ctx.finding(
                node, "SB105", f"CUBLAS_WORKSPACE_CONFIG set after CUDA may already be in use (line {earlier[0]})"
            )


CHECKS = (("SB101", hashseed_in_process), ("SB105", cublas_config_late))
