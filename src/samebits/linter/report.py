"""Lint output: text (``path:line:col: CODE name message``), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from samebits._version import __version__
from samebits.errors import printable
from samebits.linter.engine import LintResult
from samebits.rules import BY_CODE, RULES

LINT_SCHEMA_VERSION = 1


def to_text(result: LintResult) -> str:
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
    return "\n".join(lines + [summary])


def to_json(result: LintResult) -> dict[str, Any]:
    return {
        "kind": "lint",
        "schema_version": LINT_SCHEMA_VERSION,
        "files": result.files,
        "findings": [
            {"path": f.path, "line": f.line, "col": f.col, "code": f.code, "name": f.name, "message": f.message}
            for f in result.findings
        ],
        "errors": [{"path": p, "error": e} for p, e in result.errors],
        "skipped": [{"path": p, "reason": r} for p, r in result.skipped],
        "notes": list(result.notes),
    }


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
            "properties": {"category": BY_CODE[code].category},
        }
        for code in used
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
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
        for f in result.findings
    ]
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
        "results": results,
    }
    if notifications:
        run["invocations"] = [{"executionSuccessful": True, "toolExecutionNotifications": notifications}]
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}


def render(result: LintResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(result), indent=2)
    if fmt == "sarif":
        return json.dumps(to_sarif(result), indent=2)
    return to_text(result)
