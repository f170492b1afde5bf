# shaped after dmswl0707/Object-Segmentation-for-Vehicle-breakage-detection:inference.py (rewritten, not copied)
"""Evaluate a trained segkit checkpoint on the validation split: mIoU and per-class IoU."""
import argparse

import torch
import yaml
from torch.utils.data import DataLoader

from segkit.datasets import DamageDataset, val_transforms
from segkit.networks import get_net
from segkit.utils import confusion, miou, seed_everything


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("checkpoint")
    args = ap.parse_args()
    with open(args.config) as fh:
        cfg = yaml.safe_load(fh)

    seed_everything(cfg.get("seed", 42))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    net = get_net(cfg)
    state = torch.load(args.checkpoint, map_location="cpu")
    net.load_state_dict(state["model"] if "model" in state else state)
    net.to(device)

    val_set = DamageDataset(cfg["data"]["root"], split="val", transforms=val_transforms(cfg["data"]["size"]))
    loader = DataLoader(val_set, batch_size=8, shuffle=False, num_workers=4, pin_memory=True)

    n = cfg["model"]["num_classes"]
    cm = torch.zeros(n, n, dtype=torch.long, device=device)
    with torch.no_grad():
        for images, masks in loader:
            logits = net(images.to(device))
            cm += confusion(logits.argmax(1).flatten(), masks.to(device).flatten(), n)

    mean, per_class = miou(cm)
    print(f"mIoU {mean:.4f}")
    for name, v in zip(cfg["data"]["classes"], per_class):
        print(f"  {name:>12s} {v:.4f}")


if __name__ == "__main__":
    main()
