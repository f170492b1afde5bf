# shaped after jannerm/diffuser:diffuser/sampling/guides.py (rewritten, not copied)
"""Class-conditional sampling with classifier guidance: the classifier's gradient steers each step."""
import argparse

import numpy as np
import torch
import torch.nn.functional as F

from guided_diffusion.script_util import build_classifier, build_unet_and_diffusion


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unet", default="models/256x256_diffusion.pt")
    ap.add_argument("--classifier", default="models/256x256_classifier.pt")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--num", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    device = torch.device("cuda")

    model, diffusion = build_unet_and_diffusion(image_size=256, class_cond=True, steps=250)
    model.load_state_dict(torch.load(args.unet, map_location="cpu", weights_only=True))
    model.to(device).eval()

    classifier = build_classifier(image_size=256, depth=2)
    classifier.load_state_dict(torch.load(args.classifier, map_location="cpu", weights_only=True))
    classifier.to(device).eval()

    def cond_fn(x, t, y):
        # deliberately differentiable: the guidance is d log p(y | x_t) / d x_t
        with torch.enable_grad():
            x_in = x.detach().requires_grad_(True)
            logits = classifier(x_in, t)
            picked = F.log_softmax(logits, dim=-1)[torch.arange(len(y)), y]
            return torch.autograd.grad(picked.sum(), x_in)[0] * args.scale

    def model_fn(x, t, y):
        return model(x, t, y)

    samples, labels = [], []
    with torch.no_grad():
        while len(samples) * args.batch < args.num:
            y = torch.randint(0, 1000, (args.batch,), device=device)
            out = diffusion.p_sample_loop(model_fn, (args.batch, 3, 256, 256),
                                          model_kwargs={"y": y}, cond_fn=cond_fn, device=device)
            out = ((out + 1) * 127.5).clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
            samples.append(out.cpu().numpy())
            labels.append(y.cpu().numpy())

    np.savez("samples.npz", np.concatenate(samples)[: args.num], np.concatenate(labels)[: args.num])


if __name__ == "__main__":
    main()
