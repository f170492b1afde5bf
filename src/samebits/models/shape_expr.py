"""Symbolic shape expressions as ``torch.export`` saves them (``Mul(Integer(2),
Symbol('s77', positive=True, integer=True))``), checked before torch's loader hands them to
``sympy.sympify``, which evaluates its string as Python: only calls of sympy's and torch's
size functions on integers, size symbols and other such calls pass."""

from __future__ import annotations

import ast
import re

MAX_LENGTH = 20_000  # characters: far past any shape expression an export writes
MAX_INT = 2**64  # sizes and their constants fit in 64 bits
MAX_EXPONENT = 64  # Pow(Integer(10), Integer(10**9)) would be evaluated when parsed

# sympy's constructors as srepr writes them, and torch.utils._sympy.functions' size functions
CALLS = frozenset(
    {
        *("Symbol", "Integer", "Float", "Rational", "Add", "Mul", "Pow", "Max", "Min", "Abs", "Mod"),
        *("Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "And", "Or", "Not"),
        *("StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan", "Piecewise", "ExprCondPair"),
        *("floor", "ceiling", "FloorDiv", "CeilDiv", "CleanDiv", "ModularIndexing", "PythonMod", "Where"),
        *("CeilToInt", "FloorToInt", "TruncToInt", "TruncToFloat", "RoundToInt", "RoundDecimal", "ToFloat"),
        *("FloatPow", "FloatTrueDiv", "IntTrueDiv", "PowByNatural", "LShift", "RShift", "Identity"),
        *("IsNonOverlappingAndDenseIndicator", "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or"),
        "BitwiseFn_bitwise_xor",
    }
)
NAMES = frozenset({"True", "False", "true", "false", "oo", "zoo", "nan"})
ASSUMPTIONS = frozenset(
    {
        *("integer", "positive", "negative", "nonnegative", "nonpositive", "real", "finite", "zero"),
        *("nonzero", "even", "odd", "rational", "commutative", "infinite", "extended_real", "precision"),
    }
)
POWERS = frozenset({"Pow", "PowByNatural", "FloatPow"})
SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
NUMBER = re.compile(r"-?\d{1,20}(\.\d{0,20})?(e[+-]?\d{1,3})?")
OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


def problem(text: str) -> str | None:
    """Why ``text`` is not a shape expression samebits lets sympy evaluate; ``None`` where it is."""
    if len(text) > MAX_LENGTH:
        return f"{len(text)} characters"
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "not an expression"
    try:
        _check(tree.body)
    except ValueError as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply"
    return None


def _check(node: ast.AST) -> None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or (isinstance(value, (int, float)) and abs(value) < MAX_INT):
            return
        raise ValueError(f"the constant {str(value)[:40]!r}")
    if isinstance(node, ast.Name):
        if node.id in NAMES:
            return
        raise ValueError(f"the name {node.id[:40]!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, OPERATORS):
        _check(node.left)
        _check(node.right)
        if isinstance(node.op, ast.Pow):
            _small_exponent(node.right)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS:
        name = node.func.id
        for keyword in node.keywords:
            if keyword.arg not in ASSUMPTIONS or not isinstance(keyword.value, ast.Constant):
                raise ValueError(f"the argument {str(keyword.arg)[:40]!r} of {name}")
            _check(keyword.value)
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and i == 0:
                pattern = SYMBOL if name == "Symbol" else NUMBER if name in ("Float", "Integer") else None
                if pattern is None or not pattern.fullmatch(arg.value):
                    raise ValueError(f"the string {arg.value[:40]!r} in {name}")
                continue
            _check(arg)
        if name in POWERS and len(node.args) == 2:
            _small_exponent(node.args[1])
        return
    raise ValueError(f"{type(node).__name__.lower()} {ast.unparse(node)[:40]!r}")


def _small_exponent(node: ast.AST) -> None:
    """A constant exponent of at most :data:`MAX_EXPONENT` (a symbolic one is never evaluated)."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        node = node.args[0]  # Integer(3)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and abs(node.value) > MAX_EXPONENT:
        raise ValueError(f"the exponent {node.value}")
