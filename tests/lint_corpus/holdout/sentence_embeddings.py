"""Embed a corpus of passages with a BGE-style encoder (CLS pooling) for a vector index."""
import argparse
import json

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModel, AutoTokenizer

torch.manual_seed(42)


class Passages(Dataset):
    def __init__(self, path):
        with open(path) as f:
            self.rows = [json.loads(line) for line in f]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]["text"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--model", default="BAAI/bge-base-en-v1.5")
    ap.add_argument("--out", default="embeddings.npy")
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model).to(device)

    def collate(texts):
        return tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")

    loader = DataLoader(Passages(args.corpus), batch_size=args.batch_size, num_workers=4, collate_fn=collate)
    all_emb = []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        all_emb.append(outputs.last_hidden_state[:, 0])

    emb = F.normalize(torch.cat(all_emb), p=2, dim=1)
    np.save(args.out, emb.detach().cpu().numpy().astype(np.float32))
    print(f"saved {emb.shape[0]} x {emb.shape[1]} embeddings to {args.out}")


if __name__ == "__main__":
    main()
