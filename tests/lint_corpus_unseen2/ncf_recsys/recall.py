# shaped after kaixinjiuxing666/xhj_rec:ncf_/recall.py (rewritten, not copied)
"""Top-k recall for every test user with the trained NeuMF; writes recall.json and prints HR/NDCG."""
import argparse
import json
import time

import numpy as np
import torch

from ncf.model import build_model
from ncf.scoring import hit_ratio, ndcg, score_items


def load_test(npz_path):
    data = np.load(npz_path)
    users = torch.from_numpy(data["user_feats"]).float()
    items = torch.from_numpy(data["item_feats"]).float()
    held_out = [set(np.flatnonzero(row)) for row in data["held_out"]]
    seen = [np.flatnonzero(row) for row in data["seen"]]
    return users, items, held_out, seen


def run(cfg_path, weights, k):
    with open(cfg_path) as f:
        cfg = json.load(f)
    users, items, held_out, seen = load_test(cfg["test_npz"])

    net = build_model(cfg)
    net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    net.eval()

    results, hrs, ndcgs = {}, [], []
    for uid in range(users.shape[0]):
        ranked, _ = score_items(net, users[uid], items, k=k, exclude=seen[uid])
        results[uid] = ranked
        hrs.append(hit_ratio(ranked, held_out[uid]))
        ndcgs.append(ndcg(ranked, held_out[uid]))

    with open("recall.json", "w") as f:
        json.dump(results, f)
    print(f"HR@{k}={np.mean(hrs):.4f} NDCG@{k}={np.mean(ndcgs):.4f}")
    print(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/neumf.json")
    ap.add_argument("--weights", default="ncf.pth")
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()
    run(args.config, args.weights, args.k)
