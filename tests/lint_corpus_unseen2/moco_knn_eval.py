# shaped after xcvil/Self-KWD:knn_search.py (rewritten, not copied)
"""Weighted kNN evaluation of a MoCo-pretrained ResNet-50 encoder on a labelled image folder."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
from torch.utils.data import DataLoader
from tqdm import tqdm

parser = argparse.ArgumentParser(description="kNN monitor for MoCo checkpoints")
parser.add_argument("--data", required=True, help="folder with train/ and test/")
parser.add_argument("--ckpt", required=True)
parser.add_argument("-b", "--batch-size", default=256, type=int)
parser.add_argument("--knn-k", default=20, type=int)
parser.add_argument("--knn-t", default=0.1, type=float)


def load_encoder(ckpt_path):
    encoder = models.resnet50(num_classes=128)
    dim_mlp = encoder.fc.weight.shape[1]
    encoder.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), encoder.fc)
    state = torch.load(ckpt_path, map_location="cpu")["state_dict"]
    prefix = "module.encoder_q."
    state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    encoder.load_state_dict(state)
    return encoder.cuda().eval()


def feature_bank(encoder, loader):
    torch.no_grad()
    feats, labels = [], []
    for data, target in tqdm(loader, desc="memory bank"):
        f = F.normalize(encoder(data.cuda(non_blocking=True)), dim=1)
        feats.append(f.detach())
        labels.append(target)
    return torch.cat(feats).t().contiguous(), torch.cat(labels).cuda()


def knn_predict(feature, bank, bank_labels, classes, k, t):
    sim = torch.mm(feature, bank)
    sim_weight, sim_idx = sim.topk(k=k, dim=-1)
    sim_labels = torch.gather(bank_labels.expand(feature.size(0), -1), dim=-1, index=sim_idx)
    one_hot = torch.zeros(feature.size(0) * k, classes, device=sim_labels.device)
    one_hot = one_hot.scatter(dim=-1, index=sim_labels.view(-1, 1), value=1.0)
    scores = (one_hot.view(feature.size(0), -1, classes) * (sim_weight / t).exp().unsqueeze(-1)).sum(1)
    return scores.argsort(dim=-1, descending=True)


def main():
    args = parser.parse_args()
    normalize = transforms.Normalize(mean=[0.341, 0.470, 0.580], std=[0.108, 0.110, 0.130])
    test_aug = transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        normalize,
    ])
    memory_set = datasets.ImageFolder(os.path.join(args.data, "train"), test_aug)
    test_set = datasets.ImageFolder(os.path.join(args.data, "test"), test_aug)
    memory_loader = DataLoader(memory_set, batch_size=args.batch_size, shuffle=False, num_workers=2, pin_memory=True)
    test_loader = DataLoader(test_set, batch_size=1, shuffle=False, num_workers=2, pin_memory=True)

    encoder = load_encoder(args.ckpt)
    bank, bank_labels = feature_bank(encoder, memory_loader)
    correct = total = 0
    with torch.no_grad():
        for data, target in test_loader:
            feature = F.normalize(encoder(data.cuda(non_blocking=True)), dim=1)
            pred = knn_predict(feature, bank, bank_labels, len(memory_set.classes), args.knn_k, args.knn_t)
            total += data.size(0)
            correct += (pred[:, 0] == target.cuda()).float().sum().item()
    print(f"kNN (k={args.knn_k}) top-1: {100.0 * correct / total:.2f}%")


if __name__ == "__main__":
    main()
