# shaped after lucidrains/denoising-diffusion-pytorch:denoising_diffusion_pytorch/denoising_diffusion_pytorch.py (rewritten, not copied)
"""Gaussian diffusion wrapper: training loss and ancestral sampling (sampling runs without autograd)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def linear_betas(steps):
    return torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)


class GaussianDiffusion(nn.Module):
    def __init__(self, model, image_size=32, timesteps=1000):
        super().__init__()
        self.model = model
        self.image_size = image_size
        self.num_timesteps = timesteps
        betas = linear_betas(timesteps)
        alphas_cumprod = torch.cumprod(1 - betas, dim=0)
        self.register_buffer("betas", betas.float())
        self.register_buffer("sqrt_recip_alphas", (1 / torch.sqrt(1 - betas)).float())
        self.register_buffer("sqrt_one_minus_ac", torch.sqrt(1 - alphas_cumprod).float())
        prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
        self.register_buffer("posterior_var", (betas * (1 - prev) / (1 - alphas_cumprod)).float())

    def forward(self, x0):
        t = torch.randint(0, self.num_timesteps, (x0.shape[0],), device=x0.device)
        noise = torch.randn_like(x0)
        xt = x0 * (1 - self.sqrt_one_minus_ac[t] ** 2).sqrt()[:, None, None, None] \
            + self.sqrt_one_minus_ac[t][:, None, None, None] * noise
        return F.mse_loss(self.model(xt, t), noise)

    @torch.no_grad()
    def p_sample(self, x, t):
        tt = torch.full((x.shape[0],), t, device=x.device, dtype=torch.long)
        eps = self.model(x, tt)
        mean = self.sqrt_recip_alphas[t] * (x - self.betas[t] / self.sqrt_one_minus_ac[t] * eps)
        if t == 0:
            return mean
        return mean + self.posterior_var[t].sqrt() * torch.randn_like(x)

    @torch.no_grad()
    def sample(self, batch_size=16, return_all=False):
        x = torch.randn(batch_size, 3, self.image_size, self.image_size, device=self.betas.device)
        frames = []
        for t in reversed(range(self.num_timesteps)):
            x = self.p_sample(x, t)
            if return_all and t % 100 == 0:
                frames.append(x)
        x = (x.clamp(-1, 1) + 1) / 2
        return (x, frames) if return_all else x
