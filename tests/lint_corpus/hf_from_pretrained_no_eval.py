"""Toxicity filter for a scraped comment dump: keep rows the classifier scores below a cutoff."""

import argparse

import pandas as pd
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def score(texts, tokenizer, model, device, batch_size=64):
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i : i + batch_size], padding=True, truncation=True, max_length=128, return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        with torch.inference_mode():
            logits = model(**enc).logits
        out.extend(torch.sigmoid(logits[:, 0]).tolist())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parquet")
    ap.add_argument("--model", default="unitary/toxic-bert")
    ap.add_argument("--cutoff", type=float, default=0.8)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model).to(device)

    df = pd.read_parquet(args.parquet)
    texts = df["comment"].astype(str).tolist()
    df["toxicity"] = score(texts, tokenizer, model, device)
    kept = df[df["toxicity"] < args.cutoff]
    kept.to_parquet(args.parquet.replace(".parquet", ".clean.parquet"))
    print(f"kept {len(kept)}/{len(df)}")


if __name__ == "__main__":
    main()
