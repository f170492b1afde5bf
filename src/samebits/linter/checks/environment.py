"""SB101 hashseed-in-process, SB105 cublas-config-late: environment variables set too late."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from samebits.linter.checks.common import FileContext, Finding, Fixer, loads_in_main_process
from samebits.linter.checks.edits import Fix


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


PROCESS_MODULES = ("subprocess", "multiprocessing", "torch.multiprocessing", "concurrent.futures")
PROCESS_CALLS = ("os.system", "os.popen", "os.fork", "os.posix_spawn", "os.posix_spawnp")


def _starts_processes(ctx: FileContext) -> bool:
    """Whether the file may start processes that read the environment it leaves them: it imports
    ``subprocess``/``multiprocessing``/``concurrent.futures``, calls ``os.system``, ``os.exec*``,
    ``os.spawn*``, ``os.popen``, or makes a DataLoader with worker processes."""
    if any(name.startswith(PROCESS_MODULES) for name in ctx.aliases.values()):
        return True
    for call in ctx.calls:
        name = ctx.dotted(call.func) or ""
        if name in PROCESS_CALLS or name.startswith(("os.exec", "os.spawn")):
            return True
        if name.endswith("DataLoader") and not loads_in_main_process(call):
            return True
    return False


def fix_hashseed_in_process(ctx: FileContext, node: ast.AST) -> Fix | str:
    """SB101's fix: the statement commented out, under a comment that says how to set it."""
    stmt = ctx.parents.get(node) if isinstance(node, ast.Call) else node
    if not isinstance(stmt, ast.stmt) or (isinstance(stmt, ast.Expr) and stmt.value is not node):
        return "the call is part of a larger expression, whose value would be lost"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:
        return "the statement assigns other names too"
    if isinstance(node, ast.Call) and (ctx.dotted(node.func) or "") == "os.environ.update":
        keys = [k for d in node.args if isinstance(d, ast.Dict) for k in d.keys] + [k.arg for k in node.keywords]
        if len(keys) != 1 or len(node.args) > 1:
            return "it sets other variables too"
    if stmt.lineno != stmt.end_lineno or not ctx.lines.alone(stmt):
        return "the statement spans lines or shares its line with another"
    if _starts_processes(ctx):
        return "this file starts processes, and a child does read PYTHONHASHSEED from the environment it inherits: pass it in the child's env= instead"
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign)) else (node.args[1:2] or [None])[0]  # type: ignore[attr-defined]
    seed = _const(value) if value is not None else None
    seed = seed if isinstance(seed, str) and seed.isdigit() else "N"
    script = ctx.path.name if _is_script(ctx) else "..."
    indent = ctx.lines.indent(stmt.lineno)
    nl = ctx.lines.newline(stmt.lineno)
    text = [
        f"{indent}# PYTHONHASHSEED is read once, when Python starts: set here it does nothing for this process.",
        f"{indent}# Set it outside instead: samebits run --seed {seed} -- python {script} (samebits lint SB101)",
        f"{indent}# {ctx.lines[stmt.lineno][len(indent) :]}",
    ]
    if _only_statement(ctx, stmt):
        text.append(f"{indent}pass")
    return Fix(
        "comment out the in-process PYTHONHASHSEED, pointing to samebits run", (ctx.lines.whole(stmt, nl.join(text)),)
    )


def _is_script(ctx: FileContext) -> bool:
    """The file runs as a program: it has an ``if __name__ == "__main__":`` block."""
    return any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) for n in ctx.tree.body)


def _only_statement(ctx: FileContext, stmt: ast.stmt) -> bool:
    """``stmt`` is the only statement of a block (which then needs a ``pass``)."""
    parent = ctx.parents.get(stmt)
    if parent is None or isinstance(parent, ast.Module):
        return False
    return any(getattr(parent, f, None) == [stmt] for f in ("body", "orelse", "finalbody"))


FIXES: dict[str, Fixer] = {"SB101": fix_hashseed_in_process}


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
