# shaped after Dhruv23/DNNPartitioning:ResNet50-to-ONNX.py (rewritten, not copied)
"""Networks of this project, importable as `models.X`."""
from .mbv3 import MobileNetV3Small

__all__ = ["MobileNetV3Small"]
