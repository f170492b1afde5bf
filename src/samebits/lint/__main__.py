"""``python -m samebits.lint``: print docs/rules.md, rendered from the rule registry."""

from samebits.lint.rules import render_docs

print(render_docs(), end="")
