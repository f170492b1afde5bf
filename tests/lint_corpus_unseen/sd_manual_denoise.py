# shaped after huggingface/diffusers:docs/source/en/using-diffusers/write_own_pipeline.md (rewritten, not copied)
"""Text-to-image with the Stable Diffusion parts assembled by hand (no pipeline object)."""
import argparse

import torch
from diffusers import AutoencoderKL, UNet2DConditionModel, UniPCMultistepScheduler
from PIL import Image
from transformers import CLIPTextModel, CLIPTokenizer

REPO = "stable-diffusion-v1-5/stable-diffusion-v1-5"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompt")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--scale", type=float, default=7.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="out.png")
    args = ap.parse_args()
    device = "cuda"

    vae = AutoencoderKL.from_pretrained(REPO, subfolder="vae", use_safetensors=True).to(device)
    tokenizer = CLIPTokenizer.from_pretrained(REPO, subfolder="tokenizer")
    text_encoder = CLIPTextModel.from_pretrained(REPO, subfolder="text_encoder").to(device)
    unet = UNet2DConditionModel.from_pretrained(REPO, subfolder="unet").to(device)
    scheduler = UniPCMultistepScheduler.from_pretrained(REPO, subfolder="scheduler")

    # weights all come from the checkpoint, so seeding here only fixes the starting noise
    generator = torch.manual_seed(args.seed)

    tokens = tokenizer([args.prompt, ""], padding="max_length", max_length=tokenizer.model_max_length,
                       truncation=True, return_tensors="pt")
    with torch.no_grad():
        embeds = text_encoder(tokens.input_ids.to(device))[0]

    latents = torch.randn((1, unet.config.in_channels, 64, 64), generator=generator).to(device)
    latents = latents * scheduler.init_noise_sigma
    scheduler.set_timesteps(args.steps)

    for t in scheduler.timesteps:
        model_in = scheduler.scale_model_input(torch.cat([latents] * 2), timestep=t)
        with torch.no_grad():
            noise = unet(model_in, t, encoder_hidden_states=embeds).sample
        cond, uncond = noise.chunk(2)
        noise = uncond + args.scale * (cond - uncond)
        latents = scheduler.step(noise, t, latents).prev_sample

    with torch.no_grad():
        image = vae.decode(latents / 0.18215).sample
    image = ((image / 2 + 0.5).clamp(0, 1)[0].permute(1, 2, 0).cpu().numpy() * 255).round()
    Image.fromarray(image.astype("uint8")).save(args.out)


if __name__ == "__main__":
    main()
