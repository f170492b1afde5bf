"""Score a CSV of reviews with a classifier fine-tuned in-house.

The checkpoint is a raw state dict saved by our trainer, so we build the
architecture from the config and load the weights into it.
"""

import argparse

import pandas as pd
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer


def batched(items, n):
    for i in range(0, len(items), n):
        yield items[i : i + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--base", default="distilroberta-base")
    ap.add_argument("--ckpt", default="runs/reviews/best.bin")
    ap.add_argument("--num-labels", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.base)
    config = AutoConfig.from_pretrained(args.base, num_labels=args.num_labels)
    model = AutoModelForSequenceClassification.from_config(config)
    model.load_state_dict(torch.load(args.ckpt, map_location="cpu"))
    model.to(device)

    df = pd.read_csv(args.csv)
    texts = df["text"].fillna("").tolist()
    scores = []
    with torch.inference_mode():
        for chunk in batched(texts, args.batch_size):
            enc = tokenizer(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt").to(device)
            logits = model(**enc).logits
            scores.extend(logits.softmax(-1).tolist())

    for k in range(args.num_labels):
        df[f"p{k}"] = [s[k] for s in scores]
    df.to_csv(args.csv.replace(".csv", "_scored.csv"), index=False)


if __name__ == "__main__":
    main()
