"""``samebits lint``: find reproducibility, performance, memory and safety mistakes in source."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from samebits.cli.inputs import absolute

from samebits.errors import UserError
from samebits.exit_codes import exit_code

if TYPE_CHECKING:
    from samebits.linter.fix import FixResult


def lint_command(
    paths: Optional[list[str]] = typer.Argument(
        None, metavar="PATH...", help="Files or folders (default: the current folder)."
    ),
    fmt: str = typer.Option("text", "--format", help="text, json or sarif (SARIF 2.1.0, for code scanning)."),
    select: Optional[str] = typer.Option(
        None, "--select", metavar="CODES", help="Only these rules: codes, names or prefixes (SB1), comma-separated."
    ),
    ignore: Optional[str] = typer.Option(None, "--ignore", metavar="CODES", help="Skip these rules."),
    explain: Optional[str] = typer.Option(
        None, "--explain", metavar="CODE|NAME", help="Print what a rule does, why, an example and the fix."
    ),
    output: Optional[str] = typer.Option(
        None, "-o", "--output", metavar="FILE", callback=absolute, help="Write the report to FILE instead of stdout."
    ),
    apply_fixes: bool = typer.Option(
        False,
        "--fix",
        help="Rewrite the files given with the fixes that are safe (docs/lint.md#fix), then report what remains.",
    ),
    diff: bool = typer.Option(False, "--diff", help="Print what --fix would change as a unified diff; write nothing."),
) -> None:
    """Lint Python files statically (the code is parsed, never imported or run).

    Defaults and per-file ignores come from [tool.samebits.lint] in pyproject.toml; `# noqa: SB101`
    silences one line. Exit 1 when anything is found, 2 when no file could be read. With --fix,
    exit 1 when findings remain after it, 0 when none do; --diff writes nothing, so it exits as
    lint does.
    """
    from pathlib import Path

    from samebits.linter import find_rule, lint
    from samebits.linter.config import load_config
    from samebits.linter.report import render

    if explain is not None:
        rule = find_rule(explain)
        if rule is None:
            raise UserError(f"no rule '{explain}'; see docs/rules.md or `samebits lint --explain SB101`")
        typer.echo(rule.explain())
        return
    if fmt not in ("text", "json", "sarif"):
        raise UserError(f"--format must be text, json or sarif, not '{fmt}'")
    if diff and fmt != "text":
        raise UserError("--diff prints a unified diff; it takes no --format (use --fix --format json for the fixes)")
    targets = paths or ["."]
    first = Path(targets[0])
    config = load_config((first if first.is_dir() else first.parent).resolve())
    for flag, value in (("select", select), ("ignore", ignore)):
        if value:
            keys = [k.strip() for k in value.split(",") if k.strip()]
            bad = [k for k in keys if not _selector_known(k)]
            if bad:
                raise UserError(f"--{flag}: unknown rule {', '.join(bad)}; use codes (SB101), prefixes (SB1) or names")
            setattr(config, flag, keys)
    fixes = None
    if apply_fixes or diff:
        from samebits.linter.fix import fix

        fixes = fix(targets, config, write=not diff)
        result = fixes.remaining
    else:
        result = lint(targets, config)
    if diff and fixes is not None:
        text = "".join(f.diff() for f in fixes.files).rstrip("\n")
        typer.echo(_would_fix(fixes), err=True)
    else:
        text = render(result, fmt, fixes)
    if output:
        from samebits.files import atomic_write

        if Path(output).is_dir():
            raise UserError(f"-o {output} is a directory; give a file path")
        from samebits.cli.output import is_lint_output, replaceable

        replaceable(Path(output), "-o", is_lint_output, tuple(targets))
        try:
            atomic_write(Path(output), lambda tmp: tmp.write_text(text + "\n"))
        except OSError as exc:
            raise UserError(f"cannot write -o {output}: {exc.strerror}") from None
    elif text:
        typer.echo(text)
    if result.files == 0 and not result.findings and (result.errors or result.skipped):
        raise UserError(
            "no Python file could be read: " + "; ".join(f"{p}: {w}" for p, w in (result.errors + result.skipped)[:3])
        )
    raise typer.Exit(
        exit_code(found=bool(result.findings), ran=not (result.errors and result.files == len(result.errors)))
    )


def _would_fix(fixes: FixResult) -> str:
    """``--diff``'s summary line (on stderr: the diff alone is on stdout)."""
    changed = sum(f.after is not None for f in fixes.files)
    return (
        f"--fix would fix {len(fixes.fixed)} finding(s) in {changed} file(s); "
        f"{len(fixes.not_fixed)} of fixable rules would stay (--fix lists why)"
    )


def _selector_known(key: str) -> bool:
    from samebits.rules import RULES

    return any(r.code.startswith(key.upper()) or r.name == key.lower() for r in RULES)


def register(app: typer.Typer) -> None:
    app.command("lint")(lint_command)
