# shaped after biubug6/Pytorch_Retinaface:detect.py (rewritten, not copied)
"""Load a training checkpoint into a detector, tolerating DataParallel 'module.' prefixes."""
import torch


def remove_prefix(state_dict, prefix="module."):
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state_dict.items()}


def load_model(model, path, load_to_cpu=True):
    if load_to_cpu:
        pretrained = torch.load(path, map_location=lambda storage, loc: storage)
    else:
        device = torch.cuda.current_device()
        pretrained = torch.load(path, map_location=lambda storage, loc: storage.cuda(device))
    pretrained = pretrained.get("state_dict", pretrained)
    missing = set(model.state_dict()) - set(remove_prefix(pretrained))
    if missing:
        print(f"missing keys: {len(missing)}")
    model.load_state_dict(remove_prefix(pretrained), strict=False)
    return model
