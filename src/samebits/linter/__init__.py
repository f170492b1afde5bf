"""``samebits lint``: the production mistakes of PyTorch inference, found in source (AST only)."""

from samebits.linter.checks.common import Finding
from samebits.linter.engine import LintResult, lint, lint_source
from samebits.rules import RULES, Rule, find_rule

__all__ = ["RULES", "Finding", "LintResult", "Rule", "find_rule", "lint", "lint_source"]
