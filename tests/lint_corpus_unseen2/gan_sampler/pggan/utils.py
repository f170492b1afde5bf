# shaped after hphp777/GraduationProject:GAN_research/PGGAN/utils.py (rewritten, not copied)
"""Checkpoint, seeding and sampling helpers shared by train.py and generate_image.py."""
import os
import random

import numpy as np
import torch
from scipy.stats import truncnorm
from torchvision.utils import save_image


def gradient_penalty(critic, real, fake, alpha, train_step, device="cpu"):
    batch_size, c, h, w = real.shape
    beta = torch.rand((batch_size, 1, 1, 1)).repeat(1, c, h, w).to(device)
    interpolated = (real * beta + fake.detach() * (1 - beta)).requires_grad_(True)
    mixed_scores = critic(interpolated, alpha, train_step)
    gradient = torch.autograd.grad(
        inputs=interpolated,
        outputs=mixed_scores,
        grad_outputs=torch.ones_like(mixed_scores),
        create_graph=True,
        retain_graph=True,
    )[0]
    gradient_norm = gradient.view(gradient.shape[0], -1).norm(2, dim=1)
    return torch.mean((gradient_norm - 1) ** 2)


def load_checkpoint(checkpoint_file, model, optimizer, lr, device="cpu"):
    print("=> Loading checkpoint", checkpoint_file)
    checkpoint = torch.load(checkpoint_file, map_location=device)
    model.load_state_dict(checkpoint["state_dict"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    # otherwise the restored optimizer keeps the learning rate of the old run
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def seed_everything(seed=42):
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def generate_examples(gen, steps, truncation=0.7, n=100, out_dir="generated", z_dim=256, device="cpu"):
    """Truncated-normal latents, one image per file."""
    os.makedirs(out_dir, exist_ok=True)
    gen.eval()
    alpha = 1.0
    for i in range(n):
        with torch.no_grad():
            z = truncnorm.rvs(-truncation, truncation, size=(1, z_dim, 1, 1))
            noise = torch.tensor(z, device=device, dtype=torch.float32)
            img = gen(noise, alpha, steps)
            save_image(img * 0.5 + 0.5, os.path.join(out_dir, f"pggan_{i:05d}.png"))
    gen.train()
