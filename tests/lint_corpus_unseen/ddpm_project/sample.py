# shaped after lucidrains/denoising-diffusion-pytorch:denoising_diffusion_pytorch/denoising_diffusion_pytorch.py (rewritten, not copied)
"""Draw samples from the EMA weights of a trained checkpoint and save a grid."""
import argparse
import math

import torch
from torchvision.utils import save_image

from ddpm.diffusion import GaussianDiffusion
from ddpm.unet import Unet


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="results/model-100.pt")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="samples.png")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    torch.manual_seed(args.seed)
    unet = Unet(dim=64, mults=(1, 2, 4))
    diffusion = GaussianDiffusion(unet, image_size=32, timesteps=1000)
    ckpt = torch.load(args.ckpt, map_location="cpu", weights_only=True)
    diffusion.load_state_dict(ckpt["ema"])
    diffusion.to(device)
    diffusion.eval()

    images = diffusion.sample(batch_size=args.n)
    save_image(images, args.out, nrow=int(math.sqrt(args.n)))
    print(f"saved {args.n} samples to {args.out}")


if __name__ == "__main__":
    main()
