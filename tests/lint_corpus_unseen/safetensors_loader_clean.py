# shaped after iFREEGROUP/candle-models:exports/export_resnet18.py (rewritten, not copied)
"""Score a CSV of product images with a ResNet-18 head whose weights ship as safetensors."""
import argparse
import io
import json
import pickle

import pandas as pd
import torch
import torchvision
from PIL import Image
from safetensors.torch import load_file
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

TF = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor()])


class Products(Dataset):
    def __init__(self, csv_path):
        self.df = pd.read_csv(csv_path)

    def __len__(self):
        return len(self.df)

    def __getitem__(self, i):
        return TF(Image.open(self.df.path[i]).convert("RGB")), i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--weights", default="export/resnet18_products.safetensors")
    ap.add_argument("--calib", default="export/temperature.pt")
    args = ap.parse_args()

    with open("export/classes.json") as fh:
        classes = json.load(fh)
    model = torchvision.models.resnet18(num_classes=len(classes))
    model.load_state_dict(load_file(args.weights))
    model.eval()
    temperature = torch.load(args.calib, weights_only=True)["T"]

    loader = DataLoader(Products(args.csv), batch_size=64, num_workers=4)
    labels = [None] * len(loader.dataset)
    with torch.inference_mode():
        for x, idx in loader:
            probs = (model(x) / temperature).softmax(1)
            for i, p in zip(idx.tolist(), probs.argmax(1).tolist()):
                labels[i] = classes[p]

    buf = io.BytesIO()
    pickle.dump(labels, buf)  # handed to the legacy exporter, which reads it back itself
    with open("labels.pkl", "wb") as fh:
        fh.write(buf.getvalue())


if __name__ == "__main__":
    main()
