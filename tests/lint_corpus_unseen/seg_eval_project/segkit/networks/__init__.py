# shaped after dmswl0707/Object-Segmentation-for-Vehicle-breakage-detection:inference.py (rewritten, not copied)
"""Model registry: build a network from the experiment config."""
from .deeplab import DeepLabV3Plus

_REGISTRY = {"deeplabv3plus": DeepLabV3Plus}


def register(name):
    def wrap(cls):
        _REGISTRY[name.lower()] = cls
        return cls
    return wrap


def get_net(cfg):
    name = cfg["model"]["name"].lower()
    if name not in _REGISTRY:
        raise KeyError(f"unknown model {name!r}; known: {sorted(_REGISTRY)}")
    net = _REGISTRY[name](num_classes=cfg["model"]["num_classes"],
                          pretrained_backbone=cfg["model"].get("pretrained_backbone", False))
    return net
