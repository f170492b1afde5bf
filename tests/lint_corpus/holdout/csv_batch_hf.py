"""Score a CSV of customer reviews with a fine-tuned sentiment model, in batches."""
import argparse

import pandas as pd
import torch
from tqdm import tqdm
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def batched(seq, n):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--text-col", default="review")
    ap.add_argument("--model", default="distilbert-base-uncased-finetuned-sst-2-english")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="scored.csv")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model)
    model.to(device)
    if device.type == "cuda":
        model.half()
    id2label = model.config.id2label

    df = pd.read_csv(args.csv)
    texts = df[args.text_col].fillna("").astype(str).tolist()
    labels, scores = [], []
    with torch.no_grad():
        for chunk in tqdm(list(batched(texts, args.batch_size)), desc="scoring"):
            enc = tokenizer(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt")
            enc = {k: v.to(device) for k, v in enc.items()}
            logits = model(**enc).logits
            probs = logits.float().softmax(dim=-1)
            conf, idx = probs.max(dim=-1)
            labels.extend(id2label[i] for i in idx.tolist())
            scores.extend(conf.tolist())

    df["label"] = labels
    df["score"] = scores
    df.to_csv(args.out, index=False)
    print(df["label"].value_counts())


if __name__ == "__main__":
    main()
