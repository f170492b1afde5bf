"""Demo for the paper: show how confident a pretrained ResNet-18 is on corrupted CIFAR images.

python research_demo_logits_list.py --severity 3 --corruption gaussian_noise
"""

import argparse

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset
from torchvision import models
from torchvision.models import ResNet18_Weights


def load_corrupted(path, corruption, severity):
    data = np.load(f"{path}/{corruption}.npy")
    labels = np.load(f"{path}/labels.npy")
    lo, hi = (severity - 1) * 10000, severity * 10000
    x = torch.from_numpy(data[lo:hi]).permute(0, 3, 1, 2).float() / 255.0
    return TensorDataset(x, torch.from_numpy(labels[lo:hi]))


def run_demo(args):
    weights = ResNet18_Weights.DEFAULT
    model = models.resnet18(weights=weights)
    model.eval()
    preprocess = weights.transforms()

    ds = load_corrupted(args.data, args.corruption, args.severity)
    loader = DataLoader(ds, batch_size=args.batch_size)

    all_logits = []
    for images, _ in loader:
        logits = model(preprocess(images))
        all_logits.append(logits)
        if len(all_logits) * args.batch_size >= args.limit:
            break

    logits = torch.cat(all_logits)
    conf = logits.softmax(dim=1).max(dim=1).values
    print(f"{args.corruption} s{args.severity}: mean confidence {conf.mean().item():.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="CIFAR-10-C")
    parser.add_argument("--corruption", default="gaussian_noise")
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--limit", type=int, default=2048)
    run_demo(parser.parse_args())
