"""Keyword spotting over a long recording with a sliding 1 s window."""
import argparse

import torch
import torchaudio

from .model import KWSNet

SR = 16000


def load_model(path, device):
    ckpt = torch.load(path, map_location=device)
    model = KWSNet(n_mels=40, n_classes=len(ckpt["labels"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval(), ckpt["labels"]


@torch.inference_mode()
def spot(model, wav, labels, device, hop_s=0.25, thresh=0.8):
    mel = torchaudio.transforms.MelSpectrogram(sample_rate=SR, n_fft=480, hop_length=160, n_mels=40).to(device)
    windows = wav.unfold(-1, SR, int(hop_s * SR))          # (n_windows, SR)
    feats = (mel(windows.to(device)) + 1e-6).log()         # (n_windows, 40, 101)
    probs = model(feats).softmax(-1)
    conf, idx = probs.max(-1)
    hits = []
    for w, (c, k) in enumerate(zip(conf.tolist(), idx.tolist())):
        if c >= thresh and labels[k] != "_silence_":
            hits.append((w * hop_s, labels[k], c))
    return hits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("audio")
    ap.add_argument("--ckpt", default="checkpoints/kws.pt")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, labels = load_model(args.ckpt, device)
    wav, sr = torchaudio.load(args.audio)
    wav = torchaudio.functional.resample(wav.mean(0), sr, SR)
    for t, word, c in spot(model, wav, labels, device):
        print(f"{t:7.2f}s  {word:<10s} {c:.2f}")


if __name__ == "__main__":
    main()
