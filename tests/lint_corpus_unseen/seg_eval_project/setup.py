# shaped after dmswl0707/Object-Segmentation-for-Vehicle-breakage-detection:inference.py (rewritten, not copied)
"""segkit: vehicle-damage segmentation models and evaluation tools."""
from setuptools import find_packages, setup

setup(
    name="segkit",
    version="1.2.0",
    packages=find_packages(exclude=("tools",)),
    install_requires=[
        "torch>=1.10,<2.0",
        "torchvision>=0.11",
        "albumentations>=1.1",
        "pyyaml",
    ],
)
