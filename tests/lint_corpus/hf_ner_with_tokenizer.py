"""Extract named entities from support tickets (token classification, word-level merge)."""

import argparse
import json

import torch
from transformers import AutoConfig, AutoModelForTokenClassification, AutoTokenizer

MODEL_ID = "dslim/bert-base-NER"


def load(model_id, device):
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    config = AutoConfig.from_pretrained(model_id)
    model = AutoModelForTokenClassification.from_pretrained(model_id)
    model.eval()
    model.to(device)
    return tokenizer, config, model


def merge_words(word_ids, labels):
    spans, prev = [], None
    for wid, lab in zip(word_ids, labels):
        if wid is None or wid == prev:
            continue
        spans.append((wid, lab))
        prev = wid
    return spans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tickets", help="jsonl with 'id' and 'body'")
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer, config, model = load(MODEL_ID, device)

    with open(args.tickets) as fh:
        tickets = [json.loads(line) for line in fh]

    for start in range(0, len(tickets), args.batch_size):
        chunk = tickets[start : start + args.batch_size]
        words = [t["body"].split() for t in chunk]
        enc = tokenizer(words, is_split_into_words=True, padding=True, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            pred = model(**enc.to(device)).logits.argmax(-1).cpu().tolist()
        for i, ticket in enumerate(chunk):
            labels = [config.id2label[p] for p in pred[i]]
            ents = [(words[i][w], lab) for w, lab in merge_words(enc.word_ids(i), labels) if lab != "O"]
            print(json.dumps({"id": ticket["id"], "entities": ents}))


if __name__ == "__main__":
    main()
