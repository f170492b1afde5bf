# shaped after Ziad-El3assal/Automated-Breakfast-Activity-Recognition:models/Conv3D/model.py (rewritten, not copied)
"""Breakfast-actions classifier: SlowFast-R50 from torch.hub with a new head, run on test videos."""
import argparse
import csv

import torch
import torch.nn as nn

from breakfast_video import frames_from_video_file, pack_pathway

CLASSES = ["cereals", "coffee", "friedegg", "juice", "milk",
           "pancake", "salat", "sandwich", "scrambledegg", "tea"]


class SlowfastVideoClassifier(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.model = torch.hub.load("facebookresearch/pytorchvideo", "slowfast_r50", pretrained=True)
        proj = self.model.blocks[-1].proj
        self.model.blocks[-1].proj = nn.Sequential(nn.Dropout(0.5), nn.Linear(proj.in_features, num_classes))
        for p in self.model.parameters():
            p.requires_grad = False

    def forward(self, x):
        return self.model(x)


def load_slowfast_model(model_path, device):
    model = SlowfastVideoClassifier(num_classes=len(CLASSES))
    model.load_state_dict(torch.load(model_path, map_location="cpu"))
    return model.to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="checkpoints/slowfast_breakfast.pt")
    ap.add_argument("--videos", nargs="+", required=True)
    ap.add_argument("--out", default="predictions.csv")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_slowfast_model(args.weights, device)

    clips = [frames_from_video_file(p, n_frames=32, output_size=(256, 256)) for p in args.videos]
    batch = torch.stack(clips).to(device)  # (N, C, T, H, W)
    with torch.no_grad():
        logits = model(pack_pathway(batch))
    probs = logits.softmax(dim=1).cpu()

    with open(args.out, "w", newline="") as fh:
        w = csv.writer(fh)
        for path, p in zip(args.videos, probs):
            w.writerow([path, CLASSES[int(p.argmax())], f"{float(p.max()):.3f}"])


if __name__ == "__main__":
    main()
