# shaped after pcl3dv/LoopSparseGS:utils/depth_utils.py (rewritten, not copied)
"""Depth for one RGB image (HWC uint8 numpy) at its own resolution."""
import numpy as np
import torch
import torch.nn.functional as F

from depthsvc.midas_model import INPUT_SIZE, MEAN, STD, device, midas


def to_batch(rgb):
    x = torch.from_numpy(np.ascontiguousarray(rgb)).to(device).permute(2, 0, 1).float() / 255.0
    x = (x[None] - MEAN) / STD
    return F.interpolate(x, size=INPUT_SIZE, mode="bicubic", align_corners=False)


def estimate_depth(rgb, downsampling=1):
    h, w = rgb.shape[:2]
    with torch.no_grad():
        prediction = midas(to_batch(rgb))
        prediction = F.interpolate(
            prediction.unsqueeze(1),
            size=(h // downsampling, w // downsampling),
            mode="bicubic",
            align_corners=False,
        ).squeeze()
    return prediction.cpu().numpy()


def normalise(depth):
    lo, hi = float(depth.min()), float(depth.max())
    return (depth - lo) / max(hi - lo, 1e-6)
