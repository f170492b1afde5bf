# shaped after NVIDIA/tacotron2:inference.ipynb (rewritten, not copied)
"""Synthesize one wav per line of a text file: Tacotron 2 for the mel, WaveGlow for the audio."""
import argparse
import os

import numpy as np
import torch
from scipy.io.wavfile import write

from tts.hparams import create_hparams
from tts.hub import load_model
from tts.text import text_to_sequence


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lines")
    ap.add_argument("--tacotron", default="checkpoints/tacotron2_statedict.pt")
    ap.add_argument("--waveglow", default="checkpoints/waveglow_256channels.pt")
    ap.add_argument("--out", default="wavs")
    args = ap.parse_args()

    hparams = create_hparams()
    hparams.sampling_rate = 22050

    model = load_model(hparams)
    model.load_state_dict(torch.load(args.tacotron)["state_dict"])
    _ = model.cuda().eval().half()

    # WaveGlow is distributed as a pickled module, not a state dict
    waveglow = torch.load(args.waveglow, weights_only=False)["model"]
    waveglow.cuda().eval().half()

    os.makedirs(args.out, exist_ok=True)
    with open(args.lines) as fh:
        texts = [t.strip() for t in fh if t.strip()]

    for i, text in enumerate(texts):
        sequence = np.array(text_to_sequence(text, ["english_cleaners"]))[None, :]
        sequence = torch.from_numpy(sequence).cuda().long()
        mel, mel_postnet, _, alignments = model.inference(sequence)
        with torch.no_grad():
            audio = waveglow.infer(mel_postnet, sigma=0.666)
        pcm = (audio[0].float().clamp(-1, 1).cpu().numpy() * 32767).astype(np.int16)
        write(os.path.join(args.out, f"{i:04d}.wav"), hparams.sampling_rate, pcm)
        print(f"{i:04d}.wav  {len(pcm) / hparams.sampling_rate:.2f}s  {text[:60]}")


if __name__ == "__main__":
    main()
