"""Label app-store reviews one by one with a transformers pipeline and print a summary."""

import argparse
import collections
import json

from transformers import pipeline


def read_reviews(path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("lang", "en") == "en":
                yield row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reviews")
    ap.add_argument("--model", default="distilbert-base-uncased-finetuned-sst-2-english")
    ap.add_argument("--device", type=int, default=-1)
    args = ap.parse_args()

    classifier = pipeline("text-classification", model=args.model, device=args.device, truncation=True)

    counts = collections.Counter()
    labelled = []
    for row in read_reviews(args.reviews):
        pred = classifier(row["text"])[0]
        counts[pred["label"]] += 1
        labelled.append({"id": row["id"], "label": pred["label"], "score": pred["score"]})

    with open("labelled.jsonl", "w") as fh:
        for item in labelled:
            fh.write(json.dumps(item) + "\n")
    print(dict(counts))


if __name__ == "__main__":
    main()
