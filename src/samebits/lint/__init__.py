"""``samebits lint``: the production mistakes of PyTorch inference, found in source (AST only)."""

from samebits.lint.checks.common import Finding
from samebits.lint.engine import LintResult, lint, lint_source
from samebits.lint.rules import RULES, Rule, find_rule

__all__ = ["RULES", "Finding", "LintResult", "Rule", "find_rule", "lint", "lint_source"]

from samebits._callable import make_callable  # noqa: E402

make_callable(__name__, lint)
