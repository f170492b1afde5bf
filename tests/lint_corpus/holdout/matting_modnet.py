"""Portrait matting with MODNet on a folder of images (adapted from the official demo)."""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as transforms
from PIL import Image

from src.models.modnet import MODNet

REF_SIZE = 512


def scale_to_ref(im_h, im_w, ref_size=REF_SIZE):
    if max(im_h, im_w) < ref_size or min(im_h, im_w) > ref_size:
        if im_w >= im_h:
            im_rh = ref_size
            im_rw = int(im_w / im_h * ref_size)
        else:
            im_rw = ref_size
            im_rh = int(im_h / im_w * ref_size)
    else:
        im_rh, im_rw = im_h, im_w
    return im_rh - im_rh % 32, im_rw - im_rw % 32


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--input-path", required=True)
    parser.add_argument("--output-path", required=True)
    parser.add_argument("--ckpt-path", default="pretrained/modnet_photographic_portrait_matting.ckpt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    im_transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    ])

    modnet = MODNet(backbone_pretrained=False)
    weights = torch.load(args.ckpt_path, map_location="cpu")
    weights = {k.replace("module.", "", 1): v for k, v in weights.items()}
    modnet.load_state_dict(weights)
    modnet.to(device)

    os.makedirs(args.output_path, exist_ok=True)
    for im_name in sorted(os.listdir(args.input_path)):
        im = Image.open(os.path.join(args.input_path, im_name)).convert("RGB")
        im = im_transform(np.asarray(im))
        im = im[None, :, :, :]
        _, _, im_h, im_w = im.shape
        im_rh, im_rw = scale_to_ref(im_h, im_w)
        im = F.interpolate(im, size=(im_rh, im_rw), mode="area")

        with torch.no_grad():
            _, _, matte = modnet(im.to(device), True)

        matte = F.interpolate(matte, size=(im_h, im_w), mode="area")
        matte = matte[0][0].cpu().numpy()
        out_name = os.path.splitext(im_name)[0] + ".png"
        Image.fromarray((matte * 255).astype("uint8"), mode="L").save(os.path.join(args.output_path, out_name))
