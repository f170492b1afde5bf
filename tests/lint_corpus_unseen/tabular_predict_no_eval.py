# shaped after dmswl0707/Object-Segmentation-for-Vehicle-breakage-detection:inference.py (rewritten, not copied)
"""Batch-score a customer table with the churn network from our own package."""
import argparse

import numpy as np
import pandas as pd
import torch

from churnkit.features import FEATURES, build_matrix
from churnkit.nets import ChurnNet


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("--weights", default="artifacts/churnnet.pt")
    ap.add_argument("--out", default="scores.csv")
    args = ap.parse_args()

    df = pd.read_csv(args.table)
    X = torch.from_numpy(build_matrix(df[FEATURES]).astype(np.float32))

    model = ChurnNet(n_in=X.shape[1], hidden=(256, 128), dropout=0.3)
    model.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))

    with torch.inference_mode():
        proba = model.predict(X, batch_size=4096)

    df["churn_proba"] = proba.numpy()
    df[["customer_id", "churn_proba"]].to_csv(args.out, index=False)
    print(df.churn_proba.describe())


if __name__ == "__main__":
    main()
