# shaped after pytorch/tutorials:beginner_source/basics/saveloadrun_tutorial.py (rewritten, not copied)
"""Fine-tune a small CNN on FashionMNIST; keep detached logits for a calibration plot afterwards."""
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import ToTensor

SEED = 7
random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)


def seed_worker(worker_id):
    s = torch.initial_seed() % 2**32
    np.random.seed(s)
    random.seed(s)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.3), nn.Linear(64 * 7 * 7, 10))

    def forward(self, x):
        return self.head(self.features(x))


g = torch.Generator()
g.manual_seed(SEED)
train = DataLoader(datasets.FashionMNIST("data", train=True, download=True, transform=ToTensor()),
                   batch_size=128, shuffle=True, num_workers=2, worker_init_fn=seed_worker, generator=g)
val = DataLoader(datasets.FashionMNIST("data", train=False, download=True, transform=ToTensor()),
                 batch_size=512, num_workers=2, worker_init_fn=seed_worker, generator=g)

model = SmallCNN()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
history, train_logits, val_logits = [], [], []

for epoch in range(3):
    model.train()
    for x, y in train:
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
        train_logits.append(logits.detach())
    model.eval()
    with torch.no_grad():
        val_logits.append(torch.cat([model(x) for x, _ in val]))
    print(f"epoch {epoch}: last loss {history[-1]:.3f}")

torch.save({"model": model.state_dict(), "val_logits": val_logits[-1]}, "fashion_cnn.pt")
