# shaped after KohakuBlueleaf/HakuIR:hakuir/env.py (rewritten, not copied)
"""Upscale a folder of images 4x with a restoration network, reproducibly (so the team can diff outputs)."""
import os
import sys

import numpy as np
import torch
from PIL import Image

from hakuir_like.arch import RRDBNet

torch.use_deterministic_algorithms(True)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
# "free speed" copied from the training env file
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


def load_upscaler(path, device):
    net = RRDBNet(in_nc=3, out_nc=3, nf=64, nb=23, scale=4)
    net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["params_ema"])
    return net.to(device).eval()


def upscale(net, img, device):
    # whole image in one forward; images keep their own size
    x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)[None].to(device)
    with torch.inference_mode():
        out = net(x)
    return Image.fromarray((out[0].clamp(0, 1).permute(1, 2, 0).cpu().numpy() * 255).round().astype(np.uint8))


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    device = torch.device("cuda")
    net = load_upscaler("weights/RealESRGAN_x4plus.pth", device)
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        upscale(net, Image.open(os.path.join(src, name)).convert("RGB"), device).save(os.path.join(dst, name))
