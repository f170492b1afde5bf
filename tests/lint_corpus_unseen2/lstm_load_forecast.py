# shaped after 23f2001127/ipl-ai-strategy-engine:app/lstm_predict.py (rewritten, not copied)
"""Multi-step load forecast: roll the one-step LSTM forward over the horizon."""
import argparse
import pickle

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

LOOKBACK = 48


class LSTMModel(nn.Module):
    def __init__(self, n_features=4, hidden=64, layers=2, dropout=0.2):
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden, num_layers=layers, batch_first=True, dropout=dropout)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def load_lstm(path):
    model = LSTMModel()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    model.eval()
    return model


def forecast(model, history, exog_future, horizon):
    window = torch.tensor(history[-LOOKBACK:], dtype=torch.float32)
    preds = []
    with torch.no_grad():
        for step in range(horizon):
            y = model(window.unsqueeze(0)).item()
            preds.append(y)
            nxt = torch.tensor([y, *exog_future[step]], dtype=torch.float32)
            window = torch.cat([window[1:], nxt[None]], dim=0)
    return np.array(preds)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default="data/load_hourly.csv")
    ap.add_argument("--model", default="lstm_model.pth")
    ap.add_argument("--scaler", default="scaler.pkl")
    ap.add_argument("--horizon", type=int, default=24)
    args = ap.parse_args()

    with open(args.scaler, "rb") as f:
        scaler = pickle.load(f)
    df = pd.read_csv(args.csv, parse_dates=["ts"])
    feats = scaler.transform(df[["load", "temp", "hour_sin", "hour_cos"]].values)
    future_exog = feats[-args.horizon:, 1:]  # stand-in: repeat the last day's weather and calendar
    model = load_lstm(args.model)
    scaled = forecast(model, feats, future_exog, args.horizon)
    pad = np.zeros((len(scaled), feats.shape[1]))
    pad[:, 0] = scaled
    print(scaler.inverse_transform(pad)[:, 0].round(1))
