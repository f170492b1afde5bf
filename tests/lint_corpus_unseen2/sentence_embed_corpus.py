# shaped after vrindasubhash/coding:ML/sentence_embeddings/embeddings.py (rewritten, not copied)
"""Embed a JSONL corpus with mean pooling; writes an .npy matrix and the matching id list."""
import json
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BATCH = 64

device = "cuda" if torch.cuda.is_available() else "cpu"
tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = AutoModel.from_pretrained(MODEL).to(device)
torch.manual_seed(0)


def mean_pooling(token_embeddings, attention_mask):
    mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
    return (token_embeddings * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


@torch.inference_mode()
def embed(texts):
    enc = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt").to(device)
    out = model(**enc)
    emb = mean_pooling(out.last_hidden_state, enc["attention_mask"])
    return torch.nn.functional.normalize(emb, p=2, dim=1).cpu()


def main(path, out_prefix):
    ids, texts = [], []
    with open(path) as fh:
        for line in fh:
            rec = json.loads(line)
            ids.append(rec["id"])
            texts.append(rec["text"])
    chunks = []
    for i in range(0, len(texts), BATCH):
        chunks.append(embed(texts[i:i + BATCH]))
        if i % (BATCH * 50) == 0:
            print(f"{i}/{len(texts)}")
    np.save(out_prefix + ".npy", torch.cat(chunks).numpy().astype(np.float32))
    with open(out_prefix + ".ids.json", "w") as fh:
        json.dump(ids, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
