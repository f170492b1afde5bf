# shaped after foerthjo/Bachelorarbeit:Experimente/Cityscapes_Iteration_PCMhW/evaluate.py (rewritten, not copied)
"""Road-scene segmentation helper used by the annotation tool: image in, colour mask out."""
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision.models.segmentation import DeepLabV3_ResNet50_Weights, deeplabv3_resnet50

PALETTE = np.random.RandomState(3).randint(0, 255, size=(21, 3), dtype=np.uint8)


class Segmenter:
    def __init__(self, device="cuda"):
        weights = DeepLabV3_ResNet50_Weights.DEFAULT
        self.device = device
        self.net = deeplabv3_resnet50(weights=weights).to(device)
        self.net.eval()
        self.preprocess = weights.transforms()

    def _logits(self, batch):
        return self.net(batch)["out"]

    @torch.no_grad()
    def predict(self, image: Image.Image) -> np.ndarray:
        batch = self.preprocess(image).unsqueeze(0).to(self.device)
        logits = self._logits(batch)
        logits = F.interpolate(logits, size=image.size[::-1], mode="bilinear", align_corners=False)
        return logits.argmax(1)[0].cpu().numpy()

    @torch.no_grad()
    def predict_many(self, images):
        # frames from one camera share a resolution, so the list is one batch
        batch = torch.stack([self.preprocess(im) for im in images]).to(self.device)
        return self._logits(batch).argmax(1).cpu().numpy()

    def colorize(self, mask: np.ndarray) -> Image.Image:
        return Image.fromarray(PALETTE[mask])


if __name__ == "__main__":
    import sys

    seg = Segmenter()
    for path in sys.argv[1:]:
        img = Image.open(path).convert("RGB")
        seg.colorize(seg.predict(img)).save(path.rsplit(".", 1)[0] + "_mask.png")
