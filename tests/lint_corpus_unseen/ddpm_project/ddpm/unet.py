# shaped after lucidrains/denoising-diffusion-pytorch:denoising_diffusion_pytorch/denoising_diffusion_pytorch.py (rewritten, not copied)
"""A compact UNet noise predictor with sinusoidal time embeddings."""
import math

import torch
import torch.nn as nn


def time_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim, dropout=0.1):
        super().__init__()
        self.block1 = nn.Sequential(nn.GroupNorm(8, cin), nn.SiLU(), nn.Conv2d(cin, cout, 3, padding=1))
        self.temb = nn.Linear(tdim, cout)
        self.block2 = nn.Sequential(nn.GroupNorm(8, cout), nn.SiLU(), nn.Dropout(dropout),
                                    nn.Conv2d(cout, cout, 3, padding=1))
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.block1(x) + self.temb(temb)[:, :, None, None]
        return self.block2(h) + self.skip(x)


class Unet(nn.Module):
    def __init__(self, dim=64, channels=3, mults=(1, 2, 4)):
        super().__init__()
        self.dim = dim
        self.inp = nn.Conv2d(channels, dim, 3, padding=1)
        dims = [dim * m for m in mults]
        self.down = nn.ModuleList(ResBlock(a, b, dim * 4) for a, b in zip([dim] + dims[:-1], dims))
        self.up = nn.ModuleList(ResBlock(b * 2, a, dim * 4) for a, b in zip([dim] + dims[:-1], dims))
        self.tmlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.SiLU(), nn.Linear(dim * 4, dim * 4))
        self.out = nn.Conv2d(dim, channels, 1)

    def forward(self, x, t):
        temb = self.tmlp(time_embedding(t, self.dim))
        h = self.inp(x)
        skips = []
        for block in self.down:
            h = block(h, temb)
            skips.append(h)
        for block in reversed(self.up):
            h = block(torch.cat([h, skips.pop()], dim=1), temb)
        return self.out(h)
