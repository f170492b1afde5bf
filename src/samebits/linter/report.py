"""Lint output: text (``path:line:col: CODE name message``), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from samebits._version import __version__
from samebits.errors import printable
from samebits.linter.checks.common import Finding
from samebits.linter.checks.edits import Edit
from samebits.linter.engine import LintResult
from samebits.linter.fix import FixResult
from samebits.rules import BY_CODE, RULES

LINT_SCHEMA_VERSION = 1


def to_text(result: LintResult, fixes: FixResult | None = None) -> str:
    """One line per finding, error, skipped file and note, then a summary line; after ``--fix``
    (``fixes``) also one line per finding fixed and per finding a fixable rule could not fix."""
    lines = [f.text() for f in result.findings]
    lines += [f"{printable(path)}: error: {printable(why)}" for path, why in result.errors]
    lines += [f"{printable(path)}: skipped: {printable(why)}" for path, why in result.skipped]
    lines += [f"note: {printable(note)}" for note in result.notes]  # project files the index left out
    n = len(result.findings)
    summary = f"{n} finding{'s' if n != 1 else ''} in {result.files} file{'s' if result.files != 1 else ''}"
    if result.errors:
        summary += f"; {len(result.errors)} could not be read"
    if result.skipped:
        summary += f"; {len(result.skipped)} skipped"
    if fixes is not None:
        lines += [f"fixed: {_where(f)}: {f.code} {printable(what)}" for f, what in fixes.fixed]
        lines += [f"not fixed: {_where(f)}: {f.code} {printable(why)}" for f, why in fixes.not_fixed]
        summary += f"; fixed {len(fixes.fixed)}, not fixed {len(fixes.not_fixed)} (lines as before --fix)"
    elif fixable := sum(f.fix is not None for f in result.findings):
        summary += f"; {fixable} fixable with --fix"
    return "\n".join(lines + [summary])


def _where(f: Finding) -> str:
    return f"{printable(f.path)}:{f.line}:{f.col}"


def finding_json(f: Finding) -> dict[str, Any]:
    """One finding; ``fix`` its edits (lines from 1, columns in characters from 1) or null with
    ``no_fix`` saying why; ``torchfix`` TorchFix's code for the same mistake, where it has one."""
    out: dict[str, Any] = {
        "path": f.path,
        "line": f.line,
        "col": f.col,
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "fixable": f.fix is not None,
        "fix": None,
    }
    if f.fix is not None:
        out["fix"] = {"title": f.fix.title, "edits": [_edit_json(e) for e in f.fix.edits]}
    else:
        out["no_fix"] = f.no_fix
    if BY_CODE[f.code].torchfix:
        out["torchfix"] = BY_CODE[f.code].torchfix
    return out


def _edit_json(e: Edit) -> dict[str, Any]:
    return {"line": e.line, "column": e.col + 1, "end_line": e.end_line, "end_column": e.end_col + 1, "text": e.text}


def to_json(result: LintResult, fixes: FixResult | None = None) -> dict[str, Any]:
    """The report as JSON (``schema_version`` 1); after ``--fix``, ``fixed`` and ``not_fixed`` too."""
    out: dict[str, Any] = {
        "kind": "lint",
        "schema_version": LINT_SCHEMA_VERSION,
        "files": result.files,
        "findings": [finding_json(f) for f in result.findings],
        "errors": [{"path": p, "error": e} for p, e in result.errors],
        "skipped": [{"path": p, "reason": r} for p, r in result.skipped],
        "notes": list(result.notes),
    }
    if fixes is not None:
        out["fixed"] = [{**_brief(f), "fix": what} for f, what in fixes.fixed]
        out["not_fixed"] = [{**_brief(f), "reason": why} for f, why in fixes.not_fixed]
    return out


def _brief(f: Finding) -> dict[str, Any]:
    return {"path": f.path, "line": f.line, "col": f.col, "code": f.code, "name": f.name}


def uri(path: str) -> str:
    """A path as SARIF's relative URI reference: its bytes percent-encoded (a space, ``%``, ``#``,
    non-ASCII and undecodable bytes), ``/`` kept."""
    return quote(os.fsencode(path), safe="/")


def to_sarif(result: LintResult) -> dict[str, Any]:
    """A SARIF 2.1.0 log, for code scanning."""
    used = sorted({f.code for f in result.findings}) or [r.code for r in RULES if r.kind == "static"]
    index = {code: i for i, code in enumerate(used)}
    rules = [
        {
            "id": code,
            "name": BY_CODE[code].name,
            "shortDescription": {"text": BY_CODE[code].message},
            "fullDescription": {"text": BY_CODE[code].what},
            "help": {"text": f"{BY_CODE[code].why} Fix: {BY_CODE[code].fix}", "markdown": BY_CODE[code].explain()},
            "properties": {
                "category": BY_CODE[code].category,
                "fixable": bool(BY_CODE[code].autofix),
                **({"torchfix": BY_CODE[code].torchfix} if BY_CODE[code].torchfix else {}),
            },
        }
        for code in used
    ]
    results = [_sarif_result(f, index[f.code]) for f in result.findings]
    notifications = [
        {
            "level": "error",
            "message": {"text": why},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri(path)}}}],
        }
        for path, why in result.errors
    ]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "samebits", "version": __version__, "rules": rules}},
        "columnKind": "unicodeCodePoints",  # a fix's columns count characters
        "results": results,
    }
    if notifications:
        run["invocations"] = [{"executionSuccessful": True, "toolExecutionNotifications": notifications}]
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}


def _sarif_result(f: Finding, index: int) -> dict[str, Any]:
    """One SARIF result; a fixable finding carries its fix (``fixes``: the edits as replacements of
    regions, an insertion an empty region), an unfixable one says why in its properties."""
    out: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": "warning",
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(f.path)},
                    "region": {"startLine": f.line, "startColumn": f.col},
                }
            }
        ],
    }
    if f.fix is not None:
        replacements = [
            {
                "deletedRegion": {
                    "startLine": e.line,
                    "startColumn": e.col + 1,
                    "endLine": e.end_line,
                    "endColumn": e.end_col + 1,
                },
                "insertedContent": {"text": e.text},
            }
            for e in f.fix.edits
        ]
        out["fixes"] = [
            {
                "description": {"text": f.fix.title},
                "artifactChanges": [{"artifactLocation": {"uri": uri(f.path)}, "replacements": replacements}],
            }
        ]
    else:
        out["properties"] = {"noFix": f.no_fix}
    return out


def render(result: LintResult, fmt: str, fixes: FixResult | None = None) -> str:
    """The report in ``fmt`` (text, json or sarif); after ``--fix``, with what was fixed."""
    if fmt == "json":
        return json.dumps(to_json(result, fixes), indent=2)
    if fmt == "sarif":
        return json.dumps(to_sarif(result), indent=2)
    return to_text(result, fixes)
