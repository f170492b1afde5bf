"""Shared inference helpers plus a small CLI that uses them on a held-out .npz split."""

import argparse

import numpy as np
import torch
import torch.nn as nn


class TabularNet(nn.Module):
    def __init__(self, in_features, hidden=256, out_features=1):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Dropout(0.25),
            nn.Linear(hidden, out_features),
        )

    def forward(self, x):
        return self.body(x)


def predict(model, x):
    return model(x)


def predict_in_chunks(model, x, chunk=4096):
    return torch.cat([predict(model, x[i : i + chunk]) for i in range(0, len(x), chunk)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("split")
    ap.add_argument("--weights", default="tabnet.pt")
    args = ap.parse_args()

    data = np.load(args.split)
    x = torch.from_numpy(data["x"]).float()
    model = TabularNet(x.shape[1])
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()

    outputs = []
    with torch.no_grad():
        y = predict_in_chunks(model, x)
        outputs.append(y.squeeze(1))
    preds = torch.sigmoid(torch.cat(outputs)).numpy()
    print(f"positive rate: {(preds > 0.5).mean():.3f}")
    np.save(args.split.replace(".npz", "_preds.npy"), preds)


if __name__ == "__main__":
    main()
