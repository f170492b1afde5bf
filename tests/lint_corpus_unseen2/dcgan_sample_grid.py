# shaped after beesechurger275/DCGAN:main.py (rewritten, not copied)
"""Sample a grid of faces from the trained DCGAN generator."""
import argparse

import matplotlib.pyplot as plt
import numpy as np
import torch
import torchvision.utils as vutils

from dcgan_config import generator_load, nz
from dcgan_generator import Generator

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=64)
parser.add_argument("--seed", type=int, default=999)
parser.add_argument("--out", default="generated.png")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = "cuda" if torch.cuda.is_available() else "cpu"

generator = Generator().to(device)
generator.load_state_dict(torch.load(generator_load, map_location=device))

with torch.no_grad():
    fixed_noise = torch.randn(args.n, nz, 1, 1, device=device)
    img = generator(fixed_noise).detach().cpu()

grid = vutils.make_grid(img, padding=2, normalize=True)
plt.figure(figsize=(8, 8))
plt.axis("off")
plt.title("Generated Images")
plt.imshow(np.transpose(grid.numpy(), (1, 2, 0)))
plt.savefig(args.out, bbox_inches="tight")
