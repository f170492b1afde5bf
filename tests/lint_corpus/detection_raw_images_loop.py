"""Run Faster R-CNN on phone photos of any size and dump the boxes to JSON."""

import argparse
import json
from pathlib import Path

import torch
from PIL import Image
from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights, fasterrcnn_resnet50_fpn
from torchvision.transforms.functional import pil_to_tensor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--min-score", type=float, default=0.6)
    ap.add_argument("--out", default="boxes.json")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    weights = FasterRCNN_ResNet50_FPN_Weights.DEFAULT
    model = fasterrcnn_resnet50_fpn(weights=weights, box_score_thresh=args.min_score)
    model.eval().to(device)
    names = weights.meta["categories"]

    results = {}
    with torch.no_grad():
        for path in sorted(Path(args.photos).glob("*.jpg")):
            # photos keep their own resolution; the model's transform resizes internally
            img = pil_to_tensor(Image.open(path).convert("RGB")).float().div(255).to(device)
            out = model([img])[0]
            results[path.name] = [
                {"label": names[lab], "score": round(s, 3), "box": [round(v, 1) for v in box]}
                for lab, s, box in zip(out["labels"].tolist(), out["scores"].tolist(), out["boxes"].tolist())
            ]

    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"{sum(len(v) for v in results.values())} detections in {len(results)} photos")


if __name__ == "__main__":
    main()
