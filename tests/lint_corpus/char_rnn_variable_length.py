"""Score how 'name-like' each line of a file is with a character-level GRU language model."""

import argparse
import math

import torch
import torch.nn as nn

VOCAB = "<>abcdefghijklmnopqrstuvwxyz '-"
STOI = {c: i for i, c in enumerate(VOCAB)}


class CharGRU(nn.Module):
    def __init__(self, vocab_size=len(VOCAB), emb=32, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, ids):
        h, _ = self.rnn(self.embed(ids))
        return self.head(self.drop(h))


def encode(text):
    return [STOI["<"]] + [STOI[c] for c in text.lower() if c in STOI] + [STOI[">"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lines")
    ap.add_argument("--weights", default="chargru.pt")
    args = ap.parse_args()

    model = CharGRU()
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()

    with open(args.lines) as fh:
        texts = [t.strip() for t in fh if t.strip()]

    with torch.no_grad():
        for text in texts:
            # one sequence per call: lengths differ and we do not want padding in the score
            ids = torch.tensor(encode(text)).unsqueeze(0)
            logits = model(ids[:, :-1])
            nll = nn.functional.cross_entropy(logits[0], ids[0, 1:]).item()
            print(f"{math.exp(-nll):.4f}\t{text}")


if __name__ == "__main__":
    main()
