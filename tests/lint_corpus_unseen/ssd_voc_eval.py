# shaped after amdegroot/ssd.pytorch:eval.py (rewritten, not copied)
"""Evaluate a single-shot detector on VOC2007 test and cache the raw detections."""
import argparse
import os
import pickle

import cv2
import numpy as np
import torch
from torch.autograd import Variable

from ssd_model import build_detector
from voc_data import VOC_CLASSES, VOCTestSet, voc_ap_per_class

ap = argparse.ArgumentParser()
ap.add_argument("--weights", default="weights/ssd300_voc.pth")
ap.add_argument("--voc-root", default="data/VOCdevkit")
ap.add_argument("--out", default="eval_out")
ap.add_argument("--cuda", action="store_true")
args = ap.parse_args()

MEAN = np.array([104, 117, 123], dtype=np.float32)


def load_annotations(cache_file, dataset):
    if os.path.isfile(cache_file):
        with open(cache_file, "rb") as fh:
            return pickle.load(fh)
    recs = {img_id: dataset.parse_annotation(img_id) for img_id in dataset.ids}
    with open(cache_file, "wb") as fh:
        pickle.dump(recs, fh)
    return recs


def run_detector(net, dataset, use_cuda):
    n = len(dataset)
    all_boxes = [[None] * n for _ in range(len(VOC_CLASSES) + 1)]
    for i in range(n):
        img, h, w = dataset.raw_image(i)
        img = cv2.resize(img, (300, 300)).astype(np.float32) - MEAN
        im = torch.from_numpy(img[:, :, ::-1].copy()).permute(2, 0, 1)
        x = Variable(im.unsqueeze(0))
        if use_cuda:
            x = x.cuda()
        dets = net(x).data
        for c in range(1, dets.size(1)):
            d = dets[0, c]
            d = d[d[:, 0] > 0.01]
            if d.size(0) == 0:
                continue
            boxes = d[:, 1:].cpu().numpy() * np.array([w, h, w, h])
            all_boxes[c][i] = np.hstack([boxes, d[:, :1].cpu().numpy()]).astype(np.float32)
        if i % 500 == 0:
            print(f"im_detect {i + 1}/{n}")
    return all_boxes


if __name__ == "__main__":
    net = build_detector("test", 300, len(VOC_CLASSES) + 1)
    net.load_state_dict(torch.load(args.weights))
    net.eval()
    if args.cuda:
        net = net.cuda()
    dataset = VOCTestSet(args.voc_root, "test")
    os.makedirs(args.out, exist_ok=True)
    recs = load_annotations(os.path.join(args.out, "annots.pkl"), dataset)
    detections = run_detector(net, dataset, args.cuda)
    with open(os.path.join(args.out, "detections.pkl"), "wb") as fh:
        pickle.dump(detections, fh)
    for cls_idx, name in enumerate(VOC_CLASSES, start=1):
        print(name, voc_ap_per_class(detections[cls_idx], recs, name))
