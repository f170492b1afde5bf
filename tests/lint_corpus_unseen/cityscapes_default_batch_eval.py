# shaped after foerthjo/Bachelorarbeit:Experimente/Cityscapes_Iteration_PCMhW/evaluate.py (rewritten, not copied)
"""mIoU of trained DeepLabV3 checkpoints on the Cityscapes val split (downscaled to 512x1024)."""
import sys

import torch
from torch.utils.data import DataLoader
from torchmetrics.classification import MulticlassJaccardIndex
from torchvision import transforms
from torchvision.datasets import Cityscapes
from torchvision.models.segmentation import deeplabv3_resnet50

NUM_CLASSES = 19
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

img_tf = transforms.Compose([
    transforms.Resize((512, 1024)),
    transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])
mask_tf = transforms.Compose([
    transforms.Resize((512, 1024), interpolation=transforms.InterpolationMode.NEAREST),
    transforms.PILToTensor(),
])


def evaluate(model):
    val = Cityscapes("data/cityscapes", split="val", mode="fine", target_type="semantic",
                     transform=img_tf, target_transform=mask_tf)
    loader = DataLoader(val, shuffle=False)
    metric = MulticlassJaccardIndex(num_classes=NUM_CLASSES, ignore_index=255).to(device)
    with torch.no_grad():
        for image, mask in loader:
            pred = model(image.to(device))["out"].argmax(1)
            metric.update(pred, mask.squeeze(1).long().to(device))
    return metric.compute().item()


if __name__ == "__main__":
    for idx in map(int, sys.argv[1:] or ["0"]):
        model = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=NUM_CLASSES).to(device)
        model.load_state_dict(torch.load(f"model_{idx}.ckpt", map_location=device))
        model.eval()
        print(f"model_{idx}: mIoU {evaluate(model):.4f}")
