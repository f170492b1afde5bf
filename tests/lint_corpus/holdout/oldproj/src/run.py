"""Intent classifier CLI: reads utterances on stdin, prints predicted intents.

Deployed on the old inference image (see ../requirements.txt).
"""
import argparse
import pickle
import sys

import torch

from textcls.tokenize import simple_tokenize


def encode(tokens, vocab, max_len=64):
    ids = [vocab.get(t, vocab["<unk>"]) for t in tokens][:max_len]
    return ids + [vocab["<pad>"]] * (max_len - len(ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="artifacts/intent_lstm.pt")
    ap.add_argument("--vocab", default="artifacts/vocab.pkl")
    ap.add_argument("--batch-size", type=int, default=256)
    args = ap.parse_args()

    with open(args.vocab, "rb") as f:
        vocab, labels = pickle.load(f)

    model = torch.load(args.model, map_location="cpu")
    model.eval()

    lines = [line.strip() for line in sys.stdin if line.strip()]
    with torch.no_grad():
        for i in range(0, len(lines), args.batch_size):
            chunk = lines[i:i + args.batch_size]
            x = torch.tensor([encode(simple_tokenize(s), vocab) for s in chunk])
            pred = model(x).argmax(-1).tolist()
            for s, p in zip(chunk, pred):
                print(f"{labels[p]}\t{s}")


if __name__ == "__main__":
    main()
