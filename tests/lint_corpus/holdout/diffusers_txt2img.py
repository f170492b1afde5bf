"""Batch text-to-image generation with Stable Diffusion (diffusers)."""
import argparse
import json
from pathlib import Path

import torch
from diffusers import AutoencoderKL, DPMSolverMultistepScheduler, StableDiffusionPipeline


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="runwayml/stable-diffusion-v1-5")
    p.add_argument("--prompts", type=Path, required=True, help="jsonl with {prompt, negative}")
    p.add_argument("--out", type=Path, default=Path("samples"))
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--guidance", type=float, default=7.5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--n", type=int, default=4, help="images per prompt")
    return p.parse_args()


def main():
    args = parse_args()
    vae = AutoencoderKL.from_pretrained("stabilityai/sd-vae-ft-mse", torch_dtype=torch.float16)
    pipe = StableDiffusionPipeline.from_pretrained(
        args.model, vae=vae, torch_dtype=torch.float16, safety_checker=None
    )
    pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
    pipe.to("cuda")
    pipe.enable_attention_slicing()
    pipe.set_progress_bar_config(disable=True)

    args.out.mkdir(parents=True, exist_ok=True)
    records = [json.loads(line) for line in args.prompts.read_text().splitlines() if line.strip()]
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    for idx, rec in enumerate(records):
        result = pipe(
            prompt=rec["prompt"],
            negative_prompt=rec.get("negative"),
            num_inference_steps=args.steps,
            guidance_scale=args.guidance,
            num_images_per_prompt=args.n,
            generator=generator,
        )
        for j, image in enumerate(result.images):
            image.save(args.out / f"{idx:04d}_{j}.png")
        print(f"{idx}: {rec['prompt'][:60]}")


if __name__ == "__main__":
    main()
