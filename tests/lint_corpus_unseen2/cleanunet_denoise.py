# shaped after egorsmkv/CleanUNet:example.py (rewritten, not copied)
"""Denoise every .wav in a folder with a pretrained CleanUNet checkpoint."""
import argparse
import json
import os
from glob import glob

import torch
import torchaudio
from scipy.io.wavfile import write as wavwrite

from cleanunet.network import CleanUNet


@torch.no_grad()
def denoise(net, noisy, device):
    noisy = noisy.to(device)
    if noisy.dim() == 2:
        noisy = noisy.unsqueeze(0)  # (B, C, T)
    return net(noisy).squeeze(1).cpu()


def load_net(config_path, ckpt_path, device):
    with open(config_path) as f:
        network_config = json.load(f)["network_config"]
    net = CleanUNet(**network_config)
    checkpoint = torch.load(ckpt_path, map_location="cpu")
    net.load_state_dict(checkpoint["model_state_dict"])
    return net.eval().to(device)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-c", "--config", default="configs/DNS-large-full.json")
    ap.add_argument("--ckpt", default="exp/DNS-large-full/checkpoint/pretrained.pkl")
    ap.add_argument("--in-dir", default="demo/noisy")
    ap.add_argument("--out-dir", default="demo/enhanced")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = load_net(args.config, args.ckpt, device)
    os.makedirs(args.out_dir, exist_ok=True)

    for path in sorted(glob(os.path.join(args.in_dir, "*.wav"))):
        noisy_audio, sr = torchaudio.load(path)
        if sr != 16000:
            noisy_audio = torchaudio.functional.resample(noisy_audio, sr, 16000)
        enhanced = denoise(net, noisy_audio, device)
        wavwrite(os.path.join(args.out_dir, os.path.basename(path)), 16000, enhanced[0].numpy())
        print(path, round(noisy_audio.shape[-1] / 16000, 2), "s")
