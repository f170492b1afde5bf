# shaped after Wyrine/whisper_experiments:test.py (rewritten, not copied)
"""Translate (or transcribe) a folder of clips with a HF Whisper checkpoint, N clips per generate()."""
import argparse
import csv
import glob
import os

import librosa
import torch
from transformers import WhisperForConditionalGeneration, WhisperProcessor


def chunks(seq, n):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="openai/whisper-medium")
    ap.add_argument("--audio-dir", required=True)
    ap.add_argument("--language", default="fr")
    ap.add_argument("--task", default="translate")
    ap.add_argument("--out", default="transcripts.csv")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    processor = WhisperProcessor.from_pretrained(args.model)
    model = WhisperForConditionalGeneration.from_pretrained(args.model)
    model.to(device)
    forced_ids = processor.get_decoder_prompt_ids(language=args.language, task=args.task)

    files = sorted(glob.glob(os.path.join(args.audio_dir, "*.wav")))
    rows = []
    for batch_files in chunks(files, args.batch_size):
        speech = [librosa.load(f, sr=16000)[0] for f in batch_files]
        inputs = processor(speech, sampling_rate=16000, return_tensors="pt")
        inputs.to(device)
        predicted_ids = model.generate(inputs.input_features, forced_decoder_ids=forced_ids, max_new_tokens=225)
        texts = processor.batch_decode(predicted_ids, skip_special_tokens=True)
        rows.extend(zip(batch_files, texts))
        print(f"{len(rows)}/{len(files)}")

    with open(args.out, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)


if __name__ == "__main__":
    main()
