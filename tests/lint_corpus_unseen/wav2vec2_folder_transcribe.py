# shaped after Eupham/Pegboard:BoilerPlate/MLStuff/transcription.py (rewritten, not copied)
"""Transcribe every .wav file in a folder with a CTC wav2vec2 checkpoint and write a TSV."""
import argparse
import csv
from pathlib import Path

import librosa
import torch
from transformers import Wav2Vec2ForCTC, Wav2Vec2Processor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--model", default="facebook/wav2vec2-base-960h")
    ap.add_argument("--out", default="transcripts.tsv")
    args = ap.parse_args()

    processor = Wav2Vec2Processor.from_pretrained(args.model)
    model = Wav2Vec2ForCTC.from_pretrained(args.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)

    rows = []
    for path in sorted(Path(args.folder).glob("*.wav")):
        speech, _ = librosa.load(path, sr=16_000)
        # recordings have different lengths; one utterance per forward, no padding
        inputs = processor(speech, sampling_rate=16_000, return_tensors="pt")
        logits = model(inputs.input_values.to(device)).logits
        ids = torch.argmax(logits, dim=-1)
        text = processor.batch_decode(ids)[0]
        rows.append((path.name, len(speech) / 16_000, text))
        print(f"{path.name}: {text}")

    with open(args.out, "w", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t")
        writer.writerow(["file", "seconds", "text"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
