# shaped after yaoppeng/U-Net_v2:nnunetv2/run/seed.py (rewritten, not copied)
"""Re-run the validation split of a polyp-segmentation model and check the Dice is bit-identical."""
import argparse
import hashlib
import os
import random

import numpy as np
import torch
from torch.utils.data import DataLoader

from polyp.data import PolypValSet
from polyp.net import PolypUNetV2


def dice(pred, gt, eps=1e-6):
    inter = (pred * gt).sum((1, 2, 3))
    return ((2 * inter + eps) / (pred.sum((1, 2, 3)) + gt.sum((1, 2, 3)) + eps)).mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="runs/unetv2/best.pth")
    ap.add_argument("--seed", type=int, default=2023)
    args = ap.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    net = PolypUNetV2(num_classes=1).cuda()
    net.load_state_dict(torch.load(args.ckpt, map_location="cuda", weights_only=True))
    net.eval()

    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)

    loader = DataLoader(PolypValSet("data/val", size=352), batch_size=16, num_workers=0)
    scores, digest = [], hashlib.sha256()
    with torch.no_grad():
        for img, gt in loader:
            prob = torch.sigmoid(net(img.cuda()))
            digest.update(prob.cpu().numpy().tobytes())
            scores.append(dice((prob > 0.5).float(), gt.cuda()))
    print(f"dice {np.mean(scores):.4f}  outputs sha256 {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
