"""Models for bench/predict_speed.py beyond the demos and bench/serve_models.py: each factory
returns ``(model, example inputs)`` as a MODEL spec file does."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def bert():
    """The tiny transformers BERT of tests/real_models.py (2 layers, hidden 64), keyword inputs
    ``input_ids`` and ``attention_mask`` of 12 tokens."""
    from real_models import bert as build

    return build()
