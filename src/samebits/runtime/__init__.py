"""The runtime: ``samebits.Predictor``, inference done right by default."""

from samebits.runtime.predictor import Predictor

__all__ = ["Predictor"]
