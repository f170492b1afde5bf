# shaped after knmoriwaki/IM2IM:test.py (rewritten, not copied)
"""Check that two evaluation passes of the map emulator give identical fields."""
import argparse
import os

import numpy as np
import torch

from im2im.data import load_maps
from im2im.model import UNetEmulator

parser = argparse.ArgumentParser()
parser.add_argument("--weights", default="runs/unet/best.pt")
parser.add_argument("--data", default="data/test_maps.npz")
parser.add_argument("--batch", type=int, default=8)
args = parser.parse_args()

model = UNetEmulator(in_ch=1, out_ch=1, base=64).cuda()
model.load_state_dict(torch.load(args.weights, map_location="cuda", weights_only=True))
model.eval()

# reproducibility switches
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = False

x = torch.from_numpy(load_maps(args.data)).float()


def run_once():
    outs = []
    with torch.inference_mode():
        for i in range(0, len(x), args.batch):
            outs.append(model(x[i:i + args.batch].cuda()).cpu())
    return torch.cat(outs)


a = run_once()
b = run_once()
print("bitwise equal:", torch.equal(a, b), "max diff:", (a - b).abs().max().item())
np.save("emulated.npy", a.numpy())
