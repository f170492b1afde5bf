# shaped after hphp777/GraduationProject:GAN_research/PGGAN/config.py (rewritten, not copied)
"""Progressive-GAN sampler for the chest X-ray augmentation experiments."""
from setuptools import find_packages, setup

setup(
    name="pggan-sampler",
    version="0.0.4",
    description="Sample synthetic X-ray images from a trained progressive GAN",
    packages=find_packages(),
    py_modules=["generate_image"],
    python_requires=">=3.8",
    # torch comes from the CUDA base image; only the extras are pinned here
    install_requires=[
        "torchvision>=0.15",
        "scipy>=1.9",
        "numpy>=1.23",
        "tensorboard>=2.11",
        "opencv-python-headless",
    ],
    entry_points={"console_scripts": ["pggan-generate=generate_image:main"]},
)
