# shaped after Aleksashka-i/Adaptive-Tensor-Algorithm:stage_0/validate_pretrained.py (rewritten, not copied)
"""Top-1 / top-5 of a fine-tuned ResNet-50 on the ImageNet validation folder, on all GPUs."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.models import resnet50


def accuracy(output, target, topk=(1, 5)):
    _, pred = output.topk(max(topk), 1, True, True)
    correct = pred.t().eq(target.view(1, -1))
    return [correct[:k].reshape(-1).float().sum().item() for k in topk]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("valdir")
    ap.add_argument("--ckpt", default="checkpoints/model_best.pth.tar")
    ap.add_argument("-b", "--batch-size", type=int, default=256)
    args = ap.parse_args()

    model = resnet50(num_classes=1000)
    ckpt = torch.load(args.ckpt, map_location="cpu")
    model.load_state_dict({k.replace("module.", "", 1): v for k, v in ckpt["state_dict"].items()})
    model.eval()
    model = nn.DataParallel(model).cuda()

    tf = transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    loader = DataLoader(datasets.ImageFolder(args.valdir, tf), batch_size=args.batch_size,
                        shuffle=False, num_workers=8, pin_memory=True)

    top1 = top5 = seen = 0
    with torch.no_grad():
        for images, target in loader:
            images = images.cuda(non_blocking=True)
            target = target.cuda(non_blocking=True)
            c1, c5 = accuracy(model(images), target)
            top1, top5, seen = top1 + c1, top5 + c5, seen + images.size(0)
    print(f"top1 {100 * top1 / seen:.2f}  top5 {100 * top5 / seen:.2f}")


if __name__ == "__main__":
    main()
