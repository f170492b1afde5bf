"""Run Mask R-CNN (torchvision) over a folder of images; save overlays and a JSON summary."""
import argparse
import json
from pathlib import Path

import torch
from PIL import Image
from torchvision.io import write_png
from torchvision.models.detection import MaskRCNN_ResNet50_FPN_V2_Weights, maskrcnn_resnet50_fpn_v2
from torchvision.transforms import functional as F
from torchvision.utils import draw_segmentation_masks

parser = argparse.ArgumentParser()
parser.add_argument("--images", type=Path, required=True)
parser.add_argument("--out", type=Path, default=Path("maskrcnn_out"))
parser.add_argument("--score-thresh", type=float, default=0.6)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = MaskRCNN_ResNet50_FPN_V2_Weights.DEFAULT
categories = weights.meta["categories"]
model = maskrcnn_resnet50_fpn_v2(weights=weights, box_score_thresh=args.score_thresh)
model.eval().to(device)


def predict(img):
    x = F.to_tensor(img).to(device)
    return model([x])[0]


args.out.mkdir(parents=True, exist_ok=True)
summary = {}
with torch.no_grad():
    for path in sorted(args.images.glob("*.jpg")):
        img = Image.open(path).convert("RGB")
        out = predict(img)
        masks = out["masks"][:, 0] > 0.5
        names = [categories[i] for i in out["labels"].tolist()]
        summary[path.name] = {
            "labels": names,
            "scores": [round(s, 3) for s in out["scores"].tolist()],
            "boxes": out["boxes"].cpu().numpy().round(1).tolist(),
        }
        canvas = F.pil_to_tensor(img)
        if names:
            canvas = draw_segmentation_masks(canvas, masks.cpu(), alpha=0.5)
        write_png(canvas, str(args.out / f"{path.stem}.png"))
        print(f"{path.name}: {len(names)} instances")

(args.out / "summary.json").write_text(json.dumps(summary, indent=2))
