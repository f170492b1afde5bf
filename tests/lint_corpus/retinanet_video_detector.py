"""Run RetinaNet over the frames of a video and write one JSON line per frame.

Usage: python retinanet_video_detector.py clip.mp4 --out dets.jsonl --thresh 0.5
"""

import argparse
import json

import cv2
import torch
from torchvision.models.detection import RetinaNet_ResNet50_FPN_V2_Weights, retinanet_resnet50_fpn_v2
from torchvision.transforms.functional import to_tensor


class FrameDetector:
    def __init__(self, device: str = "cuda", thresh: float = 0.5):
        self.device = torch.device(device if torch.cuda.is_available() else "cpu")
        self.thresh = thresh
        weights = RetinaNet_ResNet50_FPN_V2_Weights.DEFAULT
        self.categories = weights.meta["categories"]
        self.model = retinanet_resnet50_fpn_v2(weights=weights)
        self.model.to(self.device)

    def detect(self, frame_bgr):
        rgb = cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2RGB)
        tensor = to_tensor(rgb).to(self.device)
        out = self.model([tensor])[0]
        keep = out["scores"] > self.thresh
        return {
            "boxes": out["boxes"][keep].tolist(),
            "labels": [self.categories[i] for i in out["labels"][keep].tolist()],
            "scores": out["scores"][keep].tolist(),
        }


def iter_frames(path, stride=1):
    cap = cv2.VideoCapture(path)
    idx = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        if idx % stride == 0:
            yield idx, frame
        idx += 1
    cap.release()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("video")
    parser.add_argument("--out", default="dets.jsonl")
    parser.add_argument("--thresh", type=float, default=0.5)
    parser.add_argument("--stride", type=int, default=5)
    args = parser.parse_args()

    runner = FrameDetector(thresh=args.thresh)
    with open(args.out, "w") as fh:
        for idx, frame in iter_frames(args.video, args.stride):
            dets = runner.detect(frame)
            dets["frame"] = idx
            fh.write(json.dumps(dets) + "\n")
            if idx % 100 == 0:
                print(f"frame {idx}: {len(dets['boxes'])} objects")


if __name__ == "__main__":
    main()
