# shaped after hphp777/GraduationProject:GAN_research/PGGAN/generate_image.py (rewritten, not copied)
"""Write N synthetic X-rays and a 4x2 preview grid from the trained progressive GAN."""
import argparse
import os

import torch
import torch.optim as optim
from torchvision.utils import save_image

from pggan.model import Generator
from pggan.utils import generate_examples, load_checkpoint, seed_everything

Z_DIM, IN_CHANNELS, CHANNELS_IMG = 256, 256, 3
LEARNING_RATE = 1e-3
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default="weights/generator.pth")
    parser.add_argument("--steps", type=int, default=6, help="6 -> 256x256")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--truncation", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="generated_img/pggan")
    args = parser.parse_args()

    preview_noise = torch.randn(8, Z_DIM, 1, 1)
    seed_everything(args.seed)

    gen = Generator(Z_DIM, IN_CHANNELS, img_channels=CHANNELS_IMG).to(DEVICE)
    opt_gen = optim.Adam(gen.parameters(), lr=LEARNING_RATE, betas=(0.0, 0.99))
    load_checkpoint(args.checkpoint, gen, opt_gen, LEARNING_RATE, device=DEVICE)

    generate_examples(gen, args.steps, truncation=args.truncation, n=args.n,
                      out_dir=args.out, z_dim=Z_DIM, device=DEVICE)

    gen.eval()
    with torch.no_grad():
        preview = gen(preview_noise.to(DEVICE), 1.0, args.steps)
    save_image(preview * 0.5 + 0.5, os.path.join(args.out, "preview.png"), nrow=4)


if __name__ == "__main__":
    main()
