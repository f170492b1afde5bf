"""Static checks, one module per theme; each exports ``CHECKS``: ``(code, check)`` pairs, a check
being a function ``(FileContext) -> findings`` of that code. Only the checks of selected codes run."""
