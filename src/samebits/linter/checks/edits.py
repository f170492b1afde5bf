"""The text edits a fix makes, located by the AST's node positions: lines as Python counts them
(``\\r\\n``, ``\\r`` or ``\\n`` ends one), columns in characters (the AST's are UTF-8 bytes), and
the facts about a statement's lines that a safe edit needs. Never a regular expression over code."""

from __future__ import annotations

import ast
import dataclasses
import re

NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace the text from ``(line, col)`` to ``(end_line, end_col)`` with ``text``: lines from
    1, columns in characters from 0 (an insertion where start and end are one place)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclasses.dataclass(frozen=True)
class Fix:
    """What ``samebits lint --fix`` does for one finding: its edits, and the change in words."""

    title: str
    edits: tuple[Edit, ...]


class Lines:
    """A source's physical lines, each with its own line ending ("" for a last line without one)."""

    def __init__(self, source: str) -> None:
        self.text: list[str] = []
        self.ends: list[str] = []
        self.starts: list[int] = []  # character offset of each line in the source
        at = 0
        for m in NEWLINE.finditer(source):
            self.starts.append(at)
            self.text.append(source[at : m.start()])
            self.ends.append(m.group())
            at = m.end()
        if at < len(source) or not self.text:
            self.starts.append(at)
            self.text.append(source[at:])
            self.ends.append("")
        self.length = len(source)

    def __getitem__(self, line: int) -> str:
        """Line ``line`` (from 1), without its ending."""
        return self.text[line - 1]

    def newline(self, line: int) -> str:
        """The ending of ``line``, else of the first line that has one, else ``\\n``."""
        return self.ends[line - 1] or next((e for e in self.ends if e), "\n")

    def char_col(self, line: int, byte_col: int) -> int:
        """The AST's UTF-8 byte column on ``line`` as a character column."""
        return len(self[line].encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        line = node.lineno  # type: ignore[attr-defined]
        return line, self.char_col(line, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno  # type: ignore[attr-defined]
        return line, self.char_col(line, node.end_col_offset)  # type: ignore[attr-defined]

    def offset(self, line: int, col: int) -> int:
        if not 1 <= line <= len(self.text) or not 0 <= col <= len(self.text[line - 1]):
            raise ValueError(f"no column {col} on line {line}")
        return self.starts[line - 1] + col

    def indent(self, line: int) -> str:
        text = self[line]
        return text[: len(text) - len(text.lstrip(" \t\f"))]

    def alone(self, node: ast.AST) -> bool:
        """``node`` (a statement) has its lines to itself: only indentation before it, only a
        comment after it (no ``;`` and another statement, no one-line ``if x: stmt``)."""
        line, col = self.start(node)
        end_line, end_col = self.end(node)
        after = self[end_line][end_col:].strip()
        return not self[line][:col].strip() and (not after or after.startswith("#"))

    def whole(self, node: ast.AST, text: str) -> Edit:
        """An edit that replaces the whole lines of ``node`` (endings of the last one kept) with ``text``."""
        return Edit(node.lineno, 0, node.end_lineno, len(self[node.end_lineno]), text)  # type: ignore[attr-defined]


def apply(source: str, edits: tuple[Edit, ...] | list[Edit]) -> str:
    """``source`` with ``edits`` made (``ValueError`` where two overlap or one is off the text)."""
    lines = Lines(source)
    spans = sorted((lines.offset(e.line, e.col), lines.offset(e.end_line, e.end_col), e.text) for e in edits)
    out, at = [], 0
    for start, end, text in spans:
        if start < at or end < start:
            raise ValueError("overlapping edits")
        out += [source[at:start], text]
        at = end
    return "".join(out + [source[at:]])


def spans_string_lines(node: ast.AST) -> bool:
    """Whether a string literal inside ``node`` spans lines (a triple-quoted string, an implicit
    concatenation over lines): re-indenting those lines could change the string."""
    return any(
        (isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))))
        and n.end_lineno != n.lineno
        for n in ast.walk(node)
    )


def indent_unit(tree: ast.Module, lines: Lines, indent: str) -> str:
    """One level of indentation as the file writes it: a tab where ``indent`` (the statement's)
    has one; else the step from the file's first block header to its body, where that is spaces;
    else four spaces."""
    if "\t" in indent:
        return "\t"
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.stmt) and isinstance(body, list) and body and body[0].lineno != node.lineno:
            outer, inner = lines.indent(node.lineno), lines.indent(body[0].lineno)
            step = inner[len(outer) :]
            if inner.startswith(outer) and step and set(step) == {" "}:
                return step
    return "    "
