"""``python -m samebits.linter``: print docs/rules.md, rendered from the rule registry."""

from samebits.rules import render_docs

print(render_docs(), end="")
