# shaped after biubug6/Pytorch_Retinaface:test_widerface.py (rewritten, not copied)
"""Run a detector over a folder of photos and collect the boxes above a score threshold."""
import os

import cv2
import numpy as np
import torch

from utils.box_utils import decode, py_cpu_nms
from utils.prior_box import PriorBox

MEAN_BGR = (104, 117, 123)


def run_on_folder(net, folder, device, cfg, conf_thresh=0.02, nms_thresh=0.4):
    results = {}
    for name in sorted(os.listdir(folder)):
        img_raw = cv2.imread(os.path.join(folder, name), cv2.IMREAD_COLOR)
        img = np.float32(img_raw) - MEAN_BGR
        h, w, _ = img.shape
        img = torch.from_numpy(img.transpose(2, 0, 1)).unsqueeze(0).to(device)

        loc, conf, landms = net(img)

        priors = PriorBox(cfg, image_size=(h, w)).forward().to(device)
        scale = torch.tensor([w, h, w, h], device=device)
        boxes = (decode(loc.data.squeeze(0), priors, cfg["variance"]) * scale).cpu().numpy()
        scores = conf.squeeze(0).data.cpu().numpy()[:, 1]
        keep = scores > conf_thresh
        dets = np.hstack((boxes[keep], scores[keep, None])).astype(np.float32)
        dets = dets[py_cpu_nms(dets, nms_thresh)]
        results[name] = dets
    return results


def write_widerface_txt(results, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, dets in results.items():
        with open(os.path.join(out_dir, name.rsplit(".", 1)[0] + ".txt"), "w") as fh:
            fh.write(f"{name}\n{len(dets)}\n")
            for x1, y1, x2, y2, s in dets:
                fh.write(f"{x1:.1f} {y1:.1f} {x2 - x1:.1f} {y2 - y1:.1f} {s:.3f}\n")
