# shaped after raphbrodeur/torchbayesian:torchbayesian/utils/monte_carlo_dropout.py (rewritten, not copied)
"""MC-dropout predictive mean and spread for the ward-occupancy regressor."""
import argparse

import numpy as np
import pandas as pd
import torch
import torch.nn as nn


class OccupancyNet(nn.Module):
    def __init__(self, n_in, hidden=128, p=0.2):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(p),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(p),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.body(x).squeeze(-1)


def enable_dropout(model):
    """Put only the Dropout layers back in training mode (everything else stays in eval)."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()


def mc_predict(model, x, n_samples=50):
    model.eval()
    enable_dropout(model)
    with torch.no_grad():
        samples = []
        for _ in range(n_samples):
            samples.append(model(x))
        samples = torch.stack(samples)
    return samples.mean(0), samples.std(0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", default="data/ward_features.parquet")
    ap.add_argument("--weights", default="checkpoints/occupancy.pt")
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()

    df = pd.read_parquet(args.features)
    x = torch.tensor(df.drop(columns=["ward", "date"]).values, dtype=torch.float32)
    model = OccupancyNet(n_in=x.shape[1])
    model.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    torch.manual_seed(1234)  # reproducible dropout masks
    mean, std = mc_predict(model, x, n_samples=args.samples)
    out = df[["ward", "date"]].copy()
    out["pred"] = mean.numpy()
    out["pred_std"] = std.numpy()
    out["p90"] = np.maximum(0, out["pred"] + 1.2816 * out["pred_std"])
    out.to_csv("occupancy_forecast.csv", index=False)
