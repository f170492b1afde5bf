# shaped after PHM1605/heart-rate-forecasting:src/models/lstm.py (rewritten, not copied)
"""Roll an LSTM load forecaster forward 24 hours for every meter in a parquet file."""
import argparse

import pandas as pd
import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, n_features=4, hidden=128, layers=2, dropout=0.2):
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden, layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])

    @torch.no_grad()
    def predict(self, window, horizon):
        # autoregressive: feed each prediction back as the next load value
        preds = []
        for _ in range(horizon):
            y = self(window)
            preds.append(y)
            nxt = torch.cat([y, window[:, -1, 1:]], dim=1).unsqueeze(1)
            window = torch.cat([window[:, 1:], nxt], dim=1)
        return torch.cat(preds, dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("meters")
    ap.add_argument("--weights", default="forecaster.pt")
    ap.add_argument("--lookback", type=int, default=168)
    args = ap.parse_args()

    df = pd.read_parquet(args.meters)
    windows = torch.stack([
        torch.tensor(g.sort_values("ts").iloc[-args.lookback:][["load", "temp", "hour", "dow"]].values,
                     dtype=torch.float32)
        for _, g in df.groupby("meter_id")
    ])

    model = Forecaster()
    model.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    model.eval()
    forecast = model.predict(windows, horizon=24)
    out = pd.DataFrame(forecast.numpy(), index=sorted(df.meter_id.unique()))
    out.to_csv("forecast_24h.csv")


if __name__ == "__main__":
    main()
