# shaped after NVIDIA/tacotron2:train.py (rewritten, not copied)
"""Construct the acoustic model the way training does (device and fp16 handling included)."""
import torch

from tts.model import Tacotron2


def load_model(hparams):
    model = Tacotron2(hparams).cuda()
    if hparams.fp16_run:
        model.score_mask_value = torch.finfo(torch.float16).min
    return model


def describe(model):
    n_params = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return f"{type(model).__name__}: {n_params / 1e6:.1f}M parameters ({n_train / 1e6:.1f}M trainable)"
