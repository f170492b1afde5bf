# shaped after biubug6/Pytorch_Retinaface:detect.py (rewritten, not copied)
"""Packaging for the face detector (written when torch 1.4 was current)."""
from setuptools import find_packages, setup

setup(
    name="retinaface-lite",
    version="0.3.1",
    description="RetinaFace face and landmark detector: inference scripts",
    packages=find_packages(),
    install_requires=[
        "torch>=1.4.0",
        "torchvision>=0.5.0",
        "opencv-python",
        "numpy",
    ],
    python_requires=">=3.6",
)
