# shaped after repairedserver/Project:Colorization2/image.py (rewritten, not copied)
"""Blind x4 super-resolution of every image in a folder with BSRGAN (RRDBNet)."""
import argparse
import glob
import os

import cv2
import numpy as np
import torch

from sr_models.network_rrdbnet import RRDBNet

torch.backends.cudnn.benchmark = True


def uint2tensor4(img):
    # HWC uint8 -> 1CHW float in [0, 1]
    if img.ndim == 2:
        img = np.expand_dims(img, axis=2)
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255.0).unsqueeze(0)


def tensor2uint(img):
    img = img.data.squeeze().float().clamp_(0, 1).cpu().numpy()
    if img.ndim == 3:
        img = np.transpose(img, (1, 2, 0))
    return np.uint8((img * 255.0).round())


def build_model(weights, scale, device):
    net = RRDBNet(in_nc=3, out_nc=3, nf=64, nb=23, gc=32, sf=scale)
    net.load_state_dict(torch.load(weights), strict=True)
    net.eval()
    for p in net.parameters():
        p.requires_grad = False
    return net.to(device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default="testsets/real_lr")
    parser.add_argument("--output", default="results/bsrgan_x4")
    parser.add_argument("--weights", default="model_zoo/BSRGAN.pth")
    parser.add_argument("--scale", type=int, default=4)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(args.weights, args.scale, device)
    os.makedirs(args.output, exist_ok=True)

    for path in sorted(glob.glob(os.path.join(args.input, "*"))):
        name, ext = os.path.splitext(os.path.basename(path))
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            continue
        img_L = uint2tensor4(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)).to(device)
        with torch.no_grad():
            img_E = model(img_L)
        img_E = tensor2uint(img_E)
        out_path = os.path.join(args.output, f"{name}_x{args.scale}{ext}")
        cv2.imwrite(out_path, cv2.cvtColor(img_E, cv2.COLOR_RGB2BGR))
        print(name, img.shape, "->", img_E.shape)


if __name__ == "__main__":
    main()
