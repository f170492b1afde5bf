# shaped after biubug6/Pytorch_Retinaface:detect.py (rewritten, not copied)
"""Draw detected faces and landmarks on every photo of a folder."""
import argparse
import os

import cv2
import numpy as np
import torch
import torch.backends.cudnn as cudnn

from data.config import cfg_mnet
from models.retinaface import build_retinaface
from utils.box_utils import decode, py_cpu_nms
from utils.checkpoint import load_model
from utils.prior_box import PriorBox

ap = argparse.ArgumentParser()
ap.add_argument("-m", "--trained_model", default="weights/mobilenet0.25_Final.pth")
ap.add_argument("--folder", default="photos/")
ap.add_argument("--resize", action="store_true", help="squash every photo to 640x640 first")
ap.add_argument("--vis_thres", type=float, default=0.6)
ap.add_argument("--cpu", action="store_true")
args = ap.parse_args()

if __name__ == "__main__":
    torch.set_grad_enabled(False)
    net = load_model(build_retinaface(cfg_mnet), args.trained_model, args.cpu)
    net.eval()
    cudnn.benchmark = True
    device = torch.device("cpu" if args.cpu else "cuda")
    net = net.to(device)

    os.makedirs("out", exist_ok=True)
    for name in sorted(os.listdir(args.folder)):
        img_raw = cv2.imread(os.path.join(args.folder, name), cv2.IMREAD_COLOR)
        if args.resize:
            img_raw = cv2.resize(img_raw, (640, 640))
        img = np.float32(img_raw) - (104, 117, 123)
        h, w, _ = img.shape
        img = torch.from_numpy(img.transpose(2, 0, 1)).unsqueeze(0).to(device)

        loc, conf, _ = net(img)

        priors = PriorBox(cfg_mnet, image_size=(h, w)).forward().to(device)
        boxes = decode(loc.squeeze(0), priors, cfg_mnet["variance"]) * torch.tensor([w, h, w, h], device=device)
        scores = conf.squeeze(0)[:, 1]
        dets = np.hstack((boxes.cpu().numpy(), scores.cpu().numpy()[:, None])).astype(np.float32)
        for x1, y1, x2, y2, s in dets[py_cpu_nms(dets, 0.4)]:
            if s >= args.vis_thres:
                cv2.rectangle(img_raw, (int(x1), int(y1)), (int(x2), int(y2)), (0, 0, 255), 2)
        cv2.imwrite(os.path.join("out", name), img_raw)
