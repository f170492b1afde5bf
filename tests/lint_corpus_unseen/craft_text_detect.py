# shaped after clovaai/CRAFT-pytorch:test.py (rewritten, not copied)
"""Detect text regions in every image of a folder with a CRAFT-style score/link network."""
import argparse
import os
from collections import OrderedDict

import cv2
import numpy as np
import torch
import torch.backends.cudnn as cudnn
from torch.autograd import Variable

from craft_net import TextRegionNet
import boxutil
import imageio_util

ap = argparse.ArgumentParser(description="text region detection")
ap.add_argument("--weights", default="weights/text_regions.pth")
ap.add_argument("--folder", default="samples/")
ap.add_argument("--canvas", default=1280, type=int)
ap.add_argument("--mag", default=1.5, type=float)
ap.add_argument("--cuda", action="store_true")
args = ap.parse_args()


def strip_module_prefix(state):
    out = OrderedDict()
    for key, value in state.items():
        out[key[7:] if key.startswith("module.") else key] = value
    return out


def detect_regions(net, image, use_cuda, text_thr=0.7, link_thr=0.4):
    # keeps the aspect ratio: every page gets its own canvas size
    resized, ratio, _ = imageio_util.resize_keep_aspect(image, args.canvas, mag_ratio=args.mag)
    x = imageio_util.normalize(resized)
    x = torch.from_numpy(x).permute(2, 0, 1)
    x = Variable(x.unsqueeze(0))
    if use_cuda:
        x = x.cuda()

    score, _feature = net(x)

    text_map = score[0, :, :, 0].cpu().data.numpy()
    link_map = score[0, :, :, 1].cpu().data.numpy()
    boxes = boxutil.boxes_from_maps(text_map, link_map, text_thr, link_thr)
    return boxutil.rescale(boxes, 1.0 / ratio), text_map


if __name__ == "__main__":
    net = TextRegionNet()
    state = torch.load(args.weights, map_location="cpu")
    net.load_state_dict(strip_module_prefix(state))
    if args.cuda:
        net = torch.nn.DataParallel(net.cuda())
        cudnn.benchmark = False
    net.eval()

    os.makedirs("result", exist_ok=True)
    for idx, name in enumerate(sorted(os.listdir(args.folder))):
        page = cv2.imread(os.path.join(args.folder, name))[:, :, ::-1]
        boxes, heat = detect_regions(net, page, args.cuda)
        stem = os.path.splitext(name)[0]
        cv2.imwrite(f"result/{stem}_heat.png", (np.clip(heat, 0, 1) * 255).astype(np.uint8))
        with open(f"result/{stem}.txt", "w") as fh:
            for box in boxes:
                fh.write(",".join(str(int(v)) for v in np.array(box).reshape(-1)) + "\n")
        print(f"{idx + 1}: {name} -> {len(boxes)} regions")
