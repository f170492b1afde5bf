"""Transcribe a folder of wav files with a fine-tuned wav2vec2 CTC checkpoint (raw state dict)."""
import argparse
import csv
from pathlib import Path

import torch
import torchaudio
from transformers import AutoConfig, AutoModelForCTC, Wav2Vec2Processor

TARGET_SR = 16_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config-dir", required=True, help="folder with config.json + processor files")
    ap.add_argument("--ckpt", required=True, help="state dict saved by our fine-tuning script")
    ap.add_argument("--audio-dir", type=Path, required=True)
    ap.add_argument("--out", default="transcripts.tsv")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = AutoConfig.from_pretrained(args.config_dir)
    processor = Wav2Vec2Processor.from_pretrained(args.config_dir)
    model = AutoModelForCTC.from_config(config)
    state = torch.load(args.ckpt, map_location="cpu")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        print(f"missing={len(missing)} unexpected={len(unexpected)}")
    model.to(device)

    rows = []
    with torch.inference_mode():
        for path in sorted(args.audio_dir.glob("*.wav")):
            speech, sr = torchaudio.load(str(path))
            if sr != TARGET_SR:
                speech = torchaudio.functional.resample(speech, sr, TARGET_SR)
            speech = speech.mean(dim=0)
            inputs = processor(speech.numpy(), sampling_rate=TARGET_SR, return_tensors="pt")
            logits = model(inputs.input_values.to(device)).logits
            pred_ids = logits.argmax(dim=-1)
            text = processor.batch_decode(pred_ids)[0]
            rows.append((path.name, text))
            print(f"{path.name}: {text}")

    with open(args.out, "w", newline="") as f:
        csv.writer(f, delimiter="\t").writerows(rows)


if __name__ == "__main__":
    main()
