# shaped after meijieru/crnn.pytorch:requirements.txt (rewritten, not copied)
from setuptools import find_packages, setup

with open("README.md", encoding="utf-8") as fh:
    long_description = fh.read()

setup(
    name="crnn-ocr",
    version="0.3.1",
    description="CRNN scene-text line recognizer: demo and tools",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(exclude=("tests",)),
    py_modules=["demo", "utils"],
    python_requires=">=3.6",
    install_requires=[
        "torch>=1.3.1",
        "torchvision>=0.4.2",
        "lmdb",
        "six",
        "Pillow",
        "numpy",
    ],
    entry_points={"console_scripts": ["crnn-demo=demo:main"]},
    classifiers=["Programming Language :: Python :: 3"],
)
