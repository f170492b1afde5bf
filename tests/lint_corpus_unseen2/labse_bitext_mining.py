# shaped after groq/mlagility:models/popular_on_huggingface/pvl_labse_bert.py (rewritten, not copied)
"""Bitext mining helper: LaBSE sentence vectors for two files, then nearest-neighbour pairs."""
import sys

import torch
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("pvl/labse_bert", do_lower_case=False)
model = AutoModel.from_pretrained("pvl/labse_bert")
model.eval()


def read_lines(path):
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip()]


def embed_all(sentences, batch_size=32):
    all_embs = []
    for start in range(0, len(sentences), batch_size):
        enc = tokenizer(sentences[start:start + batch_size], padding=True, truncation=True,
                        max_length=128, return_tensors="pt")
        pooled = model(**enc).pooler_output
        all_embs.append(pooled)
    embs = torch.cat(all_embs)
    return embs / embs.norm(dim=1, keepdim=True)


src = read_lines(sys.argv[1])
tgt = read_lines(sys.argv[2])
src_emb = embed_all(src)
tgt_emb = embed_all(tgt)
sim = src_emb @ tgt_emb.T
best = sim.argmax(dim=1)
for i, j in enumerate(best.tolist()):
    score = sim[i, j].item()
    if score > 0.75:
        print(f"{score:.3f}\t{src[i]}\t{tgt[j]}")
