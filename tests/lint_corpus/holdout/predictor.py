"""Cog-style predictor for a DeepLabV3-MobileNet segmentation model."""
from pathlib import Path
from typing import List

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

NUM_CLASSES = 6


class Predictor:
    def __init__(self, weights: str, device: str = None):
        self.weights = weights
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.net = None
        self.tf = T.Compose([
            T.Resize((512, 512)),
            T.ToTensor(),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])

    def load(self):
        self.net = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=NUM_CLASSES)
        ckpt = torch.load(self.weights, map_location="cpu")
        self.net.load_state_dict(ckpt.get("model", ckpt), strict=False)
        self.net.to(self.device)
        return self

    @torch.inference_mode()
    def __call__(self, image: Image.Image) -> np.ndarray:
        x = self.tf(image.convert("RGB")).unsqueeze(0).to(self.device)
        logits = self.net(x)["out"]
        logits = torch.nn.functional.interpolate(logits, size=image.size[::-1], mode="bilinear")
        return logits.argmax(1)[0].byte().cpu().numpy()

    def predict_dir(self, folder: str) -> List[Path]:
        out_dir = Path(folder) / "masks"
        out_dir.mkdir(exist_ok=True)
        written = []
        for p in sorted(Path(folder).glob("*.png")):
            mask = self(Image.open(p))
            dst = out_dir / p.name
            Image.fromarray(mask * (255 // (NUM_CLASSES - 1))).save(dst)
            written.append(dst)
        return written


if __name__ == "__main__":
    import sys

    predictor = Predictor(sys.argv[1]).load()
    for path in predictor.predict_dir(sys.argv[2]):
        print(path)
