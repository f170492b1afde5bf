"""Embed a corpus of sentences deterministically so nightly runs diff cleanly."""

import argparse
import json

import torch
from transformers import AutoModel, AutoTokenizer

torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.benchmark = False
torch.set_float32_matmul_precision("high")


def mean_pool(hidden, mask):
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input", help="jsonl with a 'text' field")
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--out", default="embeddings.pt")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    with open(args.input) as fh:
        texts = [json.loads(line)["text"] for line in fh]

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model).to(device)

    chunks = []
    with torch.inference_mode():
        for i in range(0, len(texts), args.batch_size):
            enc = tokenizer(texts[i : i + args.batch_size], padding=True, truncation=True, return_tensors="pt")
            enc = enc.to(device)
            hidden = model(**enc).last_hidden_state
            chunks.append(mean_pool(hidden, enc["attention_mask"]).cpu())
    torch.save(torch.cat(chunks), args.out)


if __name__ == "__main__":
    main()
