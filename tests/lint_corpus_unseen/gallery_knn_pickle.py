# shaped after pminhkhoi/CS336.M11.KHCL:final_project/README.md (rewritten, not copied)
"""Landmark retrieval: embed the query photo, search the pickled gallery, re-rank with a fitted PCA."""
import argparse
import pickle

import joblib
import numpy as np
import torch
from PIL import Image
from torchvision.models import ResNet101_Weights, resnet101


def load_gallery(path):
    with open(path, "rb") as fh:
        gallery = pickle.load(fh)  # {"names": [...], "feats": np.ndarray (N, 2048)}
    return gallery["names"], gallery["feats"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("query")
    ap.add_argument("--gallery", default="features/oxford_resnet101.pkl")
    ap.add_argument("--pca", default="features/pca_512.joblib")
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()

    weights = ResNet101_Weights.IMAGENET1K_V2
    net = resnet101(weights=weights)
    net.fc = torch.nn.Identity()
    net.eval()
    preprocess = weights.transforms()

    names, feats = load_gallery(args.gallery)
    pca = joblib.load(args.pca)

    with torch.no_grad():
        q = net(preprocess(Image.open(args.query).convert("RGB")).unsqueeze(0))[0].numpy()

    q_red = pca.transform(q[None])[0]
    g_red = pca.transform(feats)
    q_red /= np.linalg.norm(q_red)
    g_red /= np.linalg.norm(g_red, axis=1, keepdims=True)
    order = np.argsort(-(g_red @ q_red))[: args.k]
    for rank, i in enumerate(order, 1):
        print(f"{rank:2d}. {names[i]}")


if __name__ == "__main__":
    main()
