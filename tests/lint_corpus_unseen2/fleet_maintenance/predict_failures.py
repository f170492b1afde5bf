# shaped after degeaja/AgenticAI_FleetMaintenance:src/app/ml/serve_model.py (rewritten, not copied)
"""Nightly batch job: 7-day failure probability per vehicle from its last WINDOW telemetry rows."""
import argparse

import numpy as np
import pandas as pd
import torch

from fleetml.config import BUCKETS, DEFAULT_BUCKET, DEVICE, FEATURES, WINDOW
from fleetml.model_io import load_model, load_scaler


def make_windows(df, scaler):
    ids, windows = [], []
    for vid, g in df.sort_values("timestamp").groupby("vehicle_id"):
        if len(g) < WINDOW:
            continue
        ids.append(vid)
        windows.append(scaler.transform(g[FEATURES].values[-WINDOW:]).astype(np.float32))
    return ids, np.stack(windows)


def bucket(p):
    for threshold, name in BUCKETS:
        if p >= threshold:
            return name
    return DEFAULT_BUCKET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--telemetry", default="data/telemetry_last_45d.parquet")
    ap.add_argument("--out", default="out/fail_prob_7d.csv")
    args = ap.parse_args()

    df = pd.read_parquet(args.telemetry)
    df["n_dtc"] = df["dtc_codes"].str.len().fillna(0)
    scaler = load_scaler()
    model = load_model(len(FEATURES))

    ids, windows = make_windows(df, scaler)
    x_tensor = torch.from_numpy(windows)
    x_tensor.to(DEVICE)
    with torch.no_grad():
        probs = model(x_tensor).cpu().numpy()

    out = pd.DataFrame({"vehicle_id": ids, "fail_prob_7d": probs.round(4)})
    out["rul_bucket"] = [bucket(p) for p in probs]
    out.to_csv(args.out, index=False)
    print(out["rul_bucket"].value_counts().to_string())


if __name__ == "__main__":
    main()
