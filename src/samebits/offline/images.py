"""Image files as samples, through Pillow (``pip install 'samebits[images]'``), with one fixed,
documented preprocessing: decode (PNG, JPEG, BMP, GIF, WebP, TIFF only: no format that runs an
external program), convert to RGB, resize to H×W (bilinear), scale to [0, 1] as float32,
normalise by mean and std per channel, lay out as C×H×W. One file is one sample."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import torch

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs
from samebits.offline.sources import BadInput, InputFile, Piece, Shapes, Source, describe, row_shapes

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP", "TIFF")
EIGHT_BIT_MODES = {"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"}
MAX_SIDE = 16384


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise UserError("reading images needs Pillow: pip install 'samebits[images]'") from None
    return Image


@dataclasses.dataclass(frozen=True)
class ImagePrep:
    """How an image becomes a tensor; written into the manifest (a resume must match it)."""

    size: tuple[int, int] = (224, 224)  # H, W
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    def __post_init__(self) -> None:
        if len(self.size) != 2 or not all(isinstance(v, int) and 1 <= v <= MAX_SIDE for v in self.size):
            raise UserError(
                f"--image-size takes two integers H,W from 1 to {MAX_SIDE}, not {','.join(map(str, self.size))}"
            )
        numbers = [*self.mean, *self.std]
        if (
            len(self.mean) != 3
            or len(self.std) != 3
            or not all(math.isfinite(v) for v in numbers)
            or min(self.std) <= 0
        ):
            raise UserError("--mean and --std take 3 finite numbers each (R,G,B), and std must be > 0")

    def to_dict(self) -> dict[str, Any]:
        return {
            "decode": f"Pillow {_pillow().__version__}",
            "convert": "RGB",
            "resize": list(self.size),
            "resample": "bilinear",
            "scale": "1/255 float32",
            "mean": list(self.mean),
            "std": list(self.std),
            "layout": "CHW",
        }


def load_image(path: Any, prep: ImagePrep) -> torch.Tensor:
    """One image file as a float32 C×H×W tensor; a file that does not decode raises :class:`BadInput`."""
    image_module = _pillow()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image_module.DecompressionBombWarning)
            with image_module.open(path, formats=list(FORMATS)) as im:
                if im.mode not in EIGHT_BIT_MODES:
                    raise BadInput(
                        f"is a {im.mode} image (16-bit or float); the 8-bit preprocessing would clip it, so it is not read"
                    )
                rgb = im.convert("RGB").resize((prep.size[1], prep.size[0]), image_module.Resampling.BILINEAR)
    except BadInput:
        raise
    except Exception as exc:
        raise BadInput(
            f"does not decode as an image ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        ) from None
    scaled = np.asarray(rgb, dtype=np.float32) / np.float32(255)
    normalised = (scaled - np.asarray(prep.mean, dtype=np.float32)) / np.asarray(prep.std, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(normalised.transpose(2, 0, 1)))


class ImageSource(Source):
    """One image file: one sample, decoded when read."""

    def __init__(self, file: InputFile, prep: ImagePrep) -> None:
        self.file, self.prep, self.rows = file, prep, 1

    def read(self, a: int, b: int, reference: Shapes | None) -> Piece:
        batch = ModelInputs((load_image(self.file.path, self.prep)[None],))
        if reference is not None and row_shapes(batch) != reference:
            return Piece(None, [(0, f"it is {describe(row_shapes(batch))}; the first sample is {describe(reference)}")])
        return Piece(batch, [])
