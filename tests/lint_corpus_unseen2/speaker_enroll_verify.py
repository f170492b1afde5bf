# shaped after 49-22/voice-authentication-with-anti-spoofing:app/speaker_model.py (rewritten, not copied)
"""Enrol speakers from a folder of wavs and verify new recordings against them (ECAPA embeddings)."""
import argparse
import glob
import json
import os

import numpy as np
import torch
import torchaudio
from speechbrain.inference.speaker import EncoderClassifier

speaker_model = EncoderClassifier.from_hparams(
    source="speechbrain/spkrec-ecapa-voxceleb",
    savedir="pretrained_models/spkrec-ecapa-voxceleb",
    run_opts={"device": "cuda" if torch.cuda.is_available() else "cpu"},
)


def load_16k(path):
    signal, fs = torchaudio.load(path)
    if fs != 16000:
        signal = torchaudio.functional.resample(signal, fs, 16000)
    return signal.mean(dim=0, keepdim=True)


def extract_embedding(path):
    # 192-dimensional speaker vector
    emb = speaker_model.encode_batch(load_16k(path)).squeeze().detach().cpu().numpy()
    return emb / np.linalg.norm(emb)


def enroll(folder):
    enrolled = {}
    for spk_dir in sorted(os.listdir(folder)):
        wavs = glob.glob(os.path.join(folder, spk_dir, "*.wav"))
        if not wavs:
            continue
        vecs = [extract_embedding(w) for w in wavs]
        centroid = np.mean(vecs, axis=0)
        enrolled[spk_dir] = centroid / np.linalg.norm(centroid)
    return enrolled


def verify(enrolled, wav, threshold=0.35):
    probe = extract_embedding(wav)
    scores = {spk: float(probe @ vec) for spk, vec in enrolled.items()}
    best = max(scores, key=scores.get)
    return (best if scores[best] >= threshold else None), scores


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--enroll-dir", default="data/enroll")
    ap.add_argument("--probe", nargs="+", required=True)
    args = ap.parse_args()
    db = enroll(args.enroll_dir)
    for wav in args.probe:
        who, scores = verify(db, wav)
        print(os.path.basename(wav), "->", who, json.dumps({k: round(v, 3) for k, v in scores.items()}))
