# shaped after karpathy/nanoGPT:sample.py (rewritten, not copied)
"""Build the model from a training checkpoint, ready for sampling."""
import torch

from chatgpt.model import GPT, GPTConfig

UNWANTED_PREFIX = "_orig_mod."


def load_checkpoint(path, device="cpu", compile_model=False):
    ckpt = torch.load(path, map_location=device, weights_only=True)
    model = GPT(GPTConfig(**ckpt["model_args"]))
    state = {k[len(UNWANTED_PREFIX):] if k.startswith(UNWANTED_PREFIX) else k: v
             for k, v in ckpt["model"].items()}
    model.load_state_dict(state)
    model.eval()
    model.to(device)
    if compile_model:
        model = torch.compile(model)
    return model
