"""torchvision models as people bring them, built small with seeded random weights (no download:
``weights=None, weights_backbone=None`` everywhere). Each factory seeds torch itself and returns
``(model, example_inputs)``; tests load them as ``tv_models.py:NAME``.

The detectors take a list of two 3x128x128 images (``min_size=max_size=128``, so the transform
does not resize them). Random weights score low, so the thresholds are set where some boxes pass
and others do not (measured: RetinaNet's scores lie in 0.02-0.04, ``score_thresh=0.03`` keeps 39
and 42 boxes; Faster R-CNN's in 0.65-0.98, ``box_score_thresh=0.9`` keeps 18 and 16): each image
gets its own box count, as with trained weights. The classifiers take a batch of two 3x64x64 images.
"""

from __future__ import annotations

import torch
from torch import nn

DETECTOR_SIZE = 128
CLASSIFIER_SIZE = 64
SMALL = {"min_size": DETECTOR_SIZE, "max_size": DETECTOR_SIZE}


def images(n: int = 2, size: int = DETECTOR_SIZE, seed: int = 1) -> list[torch.Tensor]:
    """``n`` seeded images 3 x size x size with values in [0, 1), as torchvision's detectors take."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(3, size, size, generator=gen) for _ in range(n)]


def batch(n: int = 2, size: int = CLASSIFIER_SIZE, seed: int = 1) -> torch.Tensor:
    """A seeded batch ``(n, 3, size, size)`` for the classifiers."""
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _retinanet() -> nn.Module:
    from torchvision.models.detection import retinanet_resnet50_fpn

    torch.manual_seed(0)
    return retinanet_resnet50_fpn(weights=None, weights_backbone=None, score_thresh=0.03, **SMALL)


def retinanet():
    """RetinaNet (ResNet-50 FPN) in eval mode on a list of 2 images: ``list[dict(boxes, scores, labels)]``."""
    return _retinanet().eval(), (images(),)


def retinanet_train_mode():
    """The same RetinaNet with ``.eval()`` never called, called without targets: torchvision
    raises 'targets should not be none when in training mode' (the classic forum bug)."""
    return _retinanet(), (images(),)


def fasterrcnn():
    """Faster R-CNN (ResNet-50 FPN) in eval mode on a list of 2 images."""
    from torchvision.models.detection import fasterrcnn_resnet50_fpn

    torch.manual_seed(0)
    model = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.9, **SMALL)
    return model.eval(), (images(),)


def resnet18():
    """ResNet-18 in eval mode on a batch (2, 3, 64, 64)."""
    from torchvision.models import resnet18 as build

    torch.manual_seed(0)
    return build(weights=None).eval(), batch()


def mobilenet():
    """MobileNetV3-Small in eval mode on a batch (2, 3, 64, 64)."""
    from torchvision.models import mobilenet_v3_small

    torch.manual_seed(0)
    return mobilenet_v3_small(weights=None).eval(), batch()
