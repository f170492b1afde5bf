"""Compare torchvision hub models on a folder of labelled images (ImageNet class id in filename)."""
import argparse
from pathlib import Path

import torch
from PIL import Image
from torchvision import transforms as T

torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = True

TF = T.Compose([
    T.Resize(256),
    T.CenterCrop(224),
    T.ToTensor(),
    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])


def load_zoo_model(arch, device):
    model = torch.hub.load("pytorch/vision", arch, weights="DEFAULT")
    if device.type == "cuda":
        return model.cuda()
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=Path, required=True)
    ap.add_argument("--archs", nargs="+", default=["resnet50", "efficientnet_b0", "convnext_tiny"])
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    paths = sorted(args.images.glob("*.JPEG"))
    targets = torch.tensor([int(p.stem.split("_")[-1]) for p in paths])

    for arch in args.archs:
        model = load_zoo_model(arch, device)
        correct = 0
        with torch.no_grad():
            for i in range(0, len(paths), args.batch_size):
                chunk = paths[i:i + args.batch_size]
                batch = torch.stack([TF(Image.open(p).convert("RGB")) for p in chunk]).to(device)
                logits = model(batch)
                correct += (logits.argmax(1).cpu() == targets[i:i + args.batch_size]).sum().item()
        print(f"{arch:>20s}: top-1 {100.0 * correct / len(paths):.2f}%")


if __name__ == "__main__":
    main()
