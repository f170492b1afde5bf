# shaped after tgj891/face_recognition:test/p_test.py (rewritten, not copied)
"""Count people per frame of a video with a torchvision detector; writes one CSV row per frame."""
import argparse
import csv

import cv2
import torch
from torchvision.models.detection import (FasterRCNN_MobileNet_V3_Large_FPN_Weights,
                                          fasterrcnn_mobilenet_v3_large_fpn)
from torchvision.transforms.functional import to_tensor

PERSON = 1


class PeopleCounter:
    def __init__(self, min_score=0.7, device="cpu"):
        weights = FasterRCNN_MobileNet_V3_Large_FPN_Weights.DEFAULT
        self.model = fasterrcnn_mobilenet_v3_large_fpn(weights=weights, box_score_thresh=min_score)
        self.model.to(device)
        self.model.eval()
        self.device = device

    def detect(self, frame_bgr):
        img = to_tensor(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2RGB)).to(self.device)
        out = self.model([img])[0]
        keep = out["labels"] == PERSON
        return out["boxes"][keep].tolist(), out["scores"][keep].tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("video")
    ap.add_argument("--every", type=int, default=5, help="run on every n-th frame")
    ap.add_argument("--out", default="counts.csv")
    args = ap.parse_args()

    counter = PeopleCounter(device="cuda" if torch.cuda.is_available() else "cpu")
    cap = cv2.VideoCapture(args.video)
    with open(args.out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["frame", "people", "mean_score"])
        idx = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            if idx % args.every == 0:
                boxes, scores = counter.detect(frame)
                writer.writerow([idx, len(boxes), round(sum(scores) / max(len(scores), 1), 3)])
            idx += 1
    cap.release()


if __name__ == "__main__":
    main()
