# shaped after weiminw/embedding-serve:tests/test_rerank.py (rewritten, not copied)
"""Score (query, passage) pairs in fixed-size chunks, longest pairs first to cut padding."""
import torch


def _encode(tokenizer, pairs, max_length, device):
    enc = tokenizer(pairs, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


@torch.inference_mode()
def score_pairs(model, tokenizer, pairs, batch_size=32, max_length=512):
    device = next(model.parameters()).device
    order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
    scores = [0.0] * len(pairs)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        enc = _encode(tokenizer, [list(pairs[i]) for i in idx], max_length, device)
        logits = model(**enc).float()
        for i, s in zip(idx, torch.sigmoid(logits).tolist()):
            scores[i] = s
    return scores


def top_k(scores, k):
    return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
