# shaped after pcl3dv/LoopSparseGS:utils/depth_utils.py (rewritten, not copied)
"""The process-wide MiDaS model, loaded once at import and frozen."""
import os

import torch

MODEL_TYPE = os.environ.get("MIDAS_MODEL", "DPT_Hybrid")
MIDAS_SOURCE = os.environ.get("MIDAS_SOURCE", "intel-isl/MiDaS")

if os.path.isdir(MIDAS_SOURCE):
    # offline containers ship a local copy of the hub repo
    midas = torch.hub.load(MIDAS_SOURCE, model=MODEL_TYPE, source="local")
else:
    midas = torch.hub.load(MIDAS_SOURCE, MODEL_TYPE)

device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
midas.to(device)
midas.eval()
for param in midas.parameters():
    param.requires_grad = False

INPUT_SIZE = (384, 512)  # (h, w) fed to the network
MEAN = torch.tensor([0.5, 0.5, 0.5], device=device).view(1, 3, 1, 1)
STD = torch.tensor([0.5, 0.5, 0.5], device=device).view(1, 3, 1, 1)
