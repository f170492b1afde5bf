# shaped after kaixinjiuxing666/xhj_rec:ncf_/recall.py (rewritten, not copied)
"""Ranking helpers: score one user's candidate pool with a NeuMF-style model, and the usual metrics."""
import math

import torch


def expand_user(user_vec, n):
    return user_vec.view(1, -1).repeat(n, 1)


def score_items(net, user_vec, item_feats, k=10, exclude=None):
    users = expand_user(user_vec, item_feats.shape[0])
    scores = net(users, item_feats)
    if exclude is not None:
        mask = torch.zeros_like(scores, dtype=torch.bool)
        mask[exclude] = True
        scores = scores.masked_fill(mask, float("-inf"))
    top = torch.topk(scores, k=min(k, scores.numel()))
    return top.indices.tolist(), top.values.tolist()


def hit_ratio(ranked, held_out):
    return float(any(i in held_out for i in ranked))


def ndcg(ranked, held_out):
    for pos, item in enumerate(ranked):
        if item in held_out:
            return 1.0 / math.log2(pos + 2)
    return 0.0
