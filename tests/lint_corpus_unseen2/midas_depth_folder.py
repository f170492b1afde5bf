# shaped after shivareddy37/Deep-Learning:monodepth_estimation/MiDaS/depth_estimation.py (rewritten, not copied)
"""Relative depth maps (16-bit PNG) for a folder of photos with MiDaS from torch.hub."""
import argparse
import glob
import os

import cv2
import numpy as np
import torch

torch.backends.cudnn.enable = True
torch.backends.cudnn.benchmark = True


def load_midas(model_type, device):
    midas = torch.hub.load("intel-isl/MiDaS", model_type)
    midas.to(device)
    midas.eval()
    midas_transforms = torch.hub.load("intel-isl/MiDaS", "transforms")
    if model_type in ("DPT_Large", "DPT_Hybrid"):
        transform = midas_transforms.dpt_transform
    else:
        transform = midas_transforms.small_transform
    return midas, transform


def to_uint16(depth):
    lo, hi = depth.min(), depth.max()
    return ((depth - lo) / max(hi - lo, 1e-8) * 65535).astype(np.uint16)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default="input")
    ap.add_argument("--output", default="output")
    ap.add_argument("--model-type", default="DPT_Hybrid")
    args = ap.parse_args()

    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    midas, transform = load_midas(args.model_type, device)
    os.makedirs(args.output, exist_ok=True)

    for path in sorted(glob.glob(os.path.join(args.input, "*.jpg"))):
        im = cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)
        input_batch = transform(im).to(device)
        with torch.no_grad():
            prediction = midas(input_batch)
            prediction = torch.nn.functional.interpolate(
                prediction.unsqueeze(1), size=im.shape[:2], mode="bicubic", align_corners=False,
            ).squeeze()
        out = prediction.cpu().numpy()
        name = os.path.splitext(os.path.basename(path))[0]
        cv2.imwrite(os.path.join(args.output, name + ".png"), to_uint16(out))
        print(name, out.shape)
