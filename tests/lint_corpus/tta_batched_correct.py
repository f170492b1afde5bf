"""Batched flip-TTA inference for the segmentation-free leaf classifier (seeded, multi-worker loading)."""

import argparse
import random

import numpy as np
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def worker_init(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test_dir")
    ap.add_argument("--weights", default="leaf_r50.pth")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()

    seed_everything(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    tf = transforms.Compose([transforms.Resize((320, 320)), transforms.ToTensor()])
    ds = datasets.ImageFolder(args.test_dir, transform=tf)
    loader = DataLoader(ds, batch_size=32, num_workers=4, worker_init_fn=worker_init, generator=gen)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = models.resnet50(num_classes=len(ds.classes))
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval().to(device)

    preds = []
    with torch.no_grad():
        for x, _ in loader:
            x = x.to(device)
            views = torch.cat([x, x.flip(-1), x.flip(-2)])
            probs = model(views).softmax(1).view(3, x.shape[0], -1).mean(0)
            preds.append(probs.argmax(1).cpu().numpy())
    preds = np.concatenate(preds)
    for (path, _), k in zip(ds.samples, preds):
        print(path, ds.classes[k])


if __name__ == "__main__":
    main()
