"""Evaluate a ResNet-50 checkpoint on an ImageFolder validation split (top-1 / top-5 / per-class)."""
import argparse
import json

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms as T


def build_model(num_classes, ckpt=None):
    model = torchvision.models.resnet50(num_classes=num_classes)
    if ckpt is not None:
        state = torch.load(ckpt, map_location="cpu")
        model.load_state_dict(state.get("model", state))
    return model.eval()


@torch.inference_mode()
def predict_tta(model, images):
    logits = model(images) + model(torch.flip(images, dims=[3]))
    return logits / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--tta", action="store_true")
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()

    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(args.data, transform=tf)
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=False, num_workers=8, pin_memory=True)
    model = build_model(len(ds.classes), args.ckpt).to(device)

    all_logits, all_targets = [], []
    with torch.inference_mode():
        for images, targets in loader:
            images = images.to(device, non_blocking=True)
            logits = predict_tta(model, images) if args.tta else model(images)
            all_logits.append(logits.float().cpu())
            all_targets.append(targets)

    with torch.inference_mode():
        logits = torch.cat(all_logits)
        targets = torch.cat(all_targets)
        top5 = logits.topk(5, dim=1).indices
        top1_acc = (top5[:, 0] == targets).float().mean().item()
        top5_acc = (top5 == targets[:, None]).any(dim=1).float().mean().item()
        per_class = {c: (top5[targets == i, 0] == i).float().mean().item() for i, c in enumerate(ds.classes)}

    print(f"top-1 {top1_acc:.4f}  top-5 {top5_acc:.4f}")
    with open("eval_results.json", "w") as f:
        json.dump({"top1": top1_acc, "top5": top5_acc, "per_class": per_class}, f, indent=2)


if __name__ == "__main__":
    main()
