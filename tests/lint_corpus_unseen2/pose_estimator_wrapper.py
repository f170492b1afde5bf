# shaped after CheungBH/PoseTrainingPytorch:scripts/publish_model.py (rewritten, not copied)
"""Wrapper around a (pruned) SE-ResNet pose model: build from cfg, load, estimate keypoints per image."""
import argparse
import json
import os

import cv2
import numpy as np
import torch
import torch.nn as nn

from pose_models import build_pose_net
from pose_models.postprocess import get_final_preds

torch.set_grad_enabled(False)


class PoseModel:
    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.model = None
        self.input_size = (256, 320)  # (w, h)

    def build(self, cfg_path):
        with open(cfg_path) as f:
            cfg = json.load(f)
        net = build_pose_net(cfg)
        if self.device.type == "cuda" and torch.cuda.device_count() > 1:
            net = nn.DataParallel(net)
        self.model = net.to(self.device)

    def load(self, weights):
        state = torch.load(weights, map_location=self.device)
        if isinstance(self.model, nn.DataParallel):
            self.model.module.load_state_dict(state)
        else:
            self.model.load_state_dict(state)
        self.model.train(False)

    def _preprocess(self, bgr):
        img = cv2.resize(bgr, (256, 320))
        img = img[:, :, ::-1].astype(np.float32) / 255.0
        img = (img - 0.45) / 0.225
        return torch.from_numpy(img.transpose(2, 0, 1).copy()).unsqueeze(0).to(self.device)

    def estimate(self, bgr):
        h, w = bgr.shape[:2]
        heatmaps = self.model(self._preprocess(bgr))
        coords, scores = get_final_preds(heatmaps.cpu().numpy(), scale=(w / 64, h / 80))
        return coords[0], scores[0]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfg", default="buffer/cfg_pruned_seresnet18.json")
    ap.add_argument("--weights", default="buffer/pruned_seresnet18.pth")
    ap.add_argument("--images", default="samples")
    args = ap.parse_args()

    posenet = PoseModel(device="cuda" if torch.cuda.is_available() else "cpu")
    posenet.build(args.cfg)
    posenet.load(args.weights)
    for name in sorted(os.listdir(args.images)):
        bgr = cv2.imread(os.path.join(args.images, name))
        kps, conf = posenet.estimate(bgr)
        print(name, np.round(kps[:, :2]).astype(int).tolist(), np.round(conf.ravel(), 2).tolist())
