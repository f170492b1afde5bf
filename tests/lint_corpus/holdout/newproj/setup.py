from setuptools import find_packages, setup

setup(
    name="kws-infer",
    version="0.3.0",
    packages=find_packages(),
    install_requires=["torch>=2.6", "torchaudio>=2.6"],
)
