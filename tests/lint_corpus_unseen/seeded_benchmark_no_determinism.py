# shaped after PerforatedAI/PerforatedAI:Examples/hackathonProjects/perforated-monai-3d-unet/bootstrap.py (rewritten, not copied)
"""Sliding-window 3D UNet inference over a folder of CT volumes (fast settings, seeded sampling)."""
import os

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import random

import numpy as np
import torch
from monai.inferers import sliding_window_inference
from torch.utils.data import DataLoader

from ct_data import CTVolumeDataset
from unet3d import build_unet3d


def seed_everything(seed=42):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


seed_everything()
g = torch.Generator()
g.manual_seed(42)
# speed over repeatability: let cuDNN pick the fastest kernels for each window shape
torch.backends.cudnn.benchmark = True

device = torch.device("cuda")
net = build_unet3d(in_channels=1, out_channels=3)
net.load_state_dict(torch.load("weights/unet3d_best.pt", map_location="cpu", weights_only=True))
net.to(device).eval()

loader = DataLoader(CTVolumeDataset("volumes/"), batch_size=1, num_workers=4, generator=g)

os.makedirs("masks", exist_ok=True)
with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
    for vol, name in loader:
        logits = sliding_window_inference(vol.to(device), roi_size=(96, 96, 96), sw_batch_size=8,
                                          predictor=net, overlap=0.25)
        mask = logits.argmax(1).squeeze(0).to(torch.uint8).cpu().numpy()
        np.save(os.path.join("masks", name[0] + ".npy"), mask)
