# shaped after gabeguo/uncertainty_mae:main_linprobe.py (rewritten, not copied)
"""Linear probe: train only a BN + linear head on a frozen ViT-B/16, report val accuracy each epoch."""
import argparse
import random

import numpy as np
import timm
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="../data")
parser.add_argument("--epochs", type=int, default=90)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--batch-size", type=int, default=512)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
np.random.seed(args.seed)
random.seed(args.seed)
cudnn.benchmark = True
g = torch.Generator().manual_seed(args.seed)

norm = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
train_tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor(), norm])
val_tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), norm])
train_set = datasets.CIFAR100(args.data, train=True, download=True, transform=train_tf)
val_set = datasets.CIFAR100(args.data, train=False, download=True, transform=val_tf)
train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=8,
                          generator=g, drop_last=True)
val_loader = DataLoader(val_set, batch_size=args.batch_size, shuffle=False, num_workers=8, generator=g)

model = timm.create_model("vit_base_patch16_224", pretrained=True, num_classes=100)
model.head = nn.Sequential(nn.BatchNorm1d(model.head.in_features, affine=False, eps=1e-6), model.head)
for name, p in model.named_parameters():
    p.requires_grad = name.startswith("head.")
model.cuda()

optimizer = torch.optim.SGD(model.head.parameters(), lr=args.lr, momentum=0.9, weight_decay=0.0)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
criterion = nn.CrossEntropyLoss()


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    for images, target in loader:
        logits = model(images.cuda(non_blocking=True))
        correct += (logits.argmax(1).cpu() == target).sum().item()
        total += target.numel()
    return 100.0 * correct / total


for epoch in range(args.epochs):
    model.train()
    for images, target in train_loader:
        images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    acc = evaluate(model, val_loader)
    print(f"epoch {epoch}: loss {loss.item():.3f}  val acc {acc:.2f}")
    torch.save({"head": model.head.state_dict(), "epoch": epoch}, "linprobe_head.pth")
