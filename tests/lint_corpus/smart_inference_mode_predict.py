"""Crop classifier CLI in the style of the YOLOv5 scripts (decorator picks inference_mode when available)."""

import argparse
from pathlib import Path

import timm
import torch
from PIL import Image
from torchvision import transforms

CLASSES = ["ok", "scratch", "dent", "missing_part"]


def smart_inference_mode(torch_1_9=True):
    # inference_mode where the installed torch has it, no_grad otherwise
    def decorate(fn):
        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

    return decorate


def select_device(device=""):
    if device and device != "cpu" and torch.cuda.is_available():
        return torch.device(f"cuda:{device}" if device.isdigit() else device)
    return torch.device("cpu")


@smart_inference_mode()
def run(weights="best.pt", source="crops/", imgsz=224, device="", arch="resnet50"):
    device = select_device(device)
    model = timm.create_model(arch, pretrained=False, num_classes=len(CLASSES))
    model.load_state_dict(torch.load(weights, map_location="cpu"))
    model.to(device)
    model.eval()

    tf = transforms.Compose([transforms.Resize((imgsz, imgsz)), transforms.ToTensor()])
    paths = sorted(Path(source).glob("*.png"))
    if not paths:
        print(f"no images in {source}")
        return []
    batch = torch.stack([tf(Image.open(p).convert("RGB")) for p in paths]).to(device)
    probs = model(batch).softmax(1)
    conf, cls = probs.max(1)
    results = []
    for p, c, k in zip(paths, conf.tolist(), cls.tolist()):
        results.append((p.name, CLASSES[k], c))
        print(f"{p.name}: {CLASSES[k]} {c:.2f}")
    return results


def parse_opt():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", default="best.pt")
    parser.add_argument("--source", default="crops/")
    parser.add_argument("--imgsz", type=int, default=224)
    parser.add_argument("--device", default="")
    return parser.parse_args()


if __name__ == "__main__":
    run(**vars(parse_opt()))
