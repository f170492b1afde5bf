"""Static checks, one module per theme; each exports ``CHECKS``: functions ``(FileContext) -> findings``."""
