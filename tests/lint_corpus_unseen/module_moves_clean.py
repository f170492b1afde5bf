# shaped after xu1718191411/BAOZIHOUSE:query_online.py (rewritten, not copied)
"""Query an image index: fp16 backbone + small projection head, cosine top-k against stored features."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from torchvision import models, transforms


class QueryEncoder(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.backbone = models.resnet50(weights=models.ResNet50_Weights.IMAGENET1K_V2)
        self.backbone.fc = nn.Identity()
        self.head = nn.Linear(2048, dim)

    def to_fp16(self):
        self.backbone.half()
        return self

    def forward(self, x):
        feats = self.backbone(x.half())
        return F.normalize(self.head(feats.float()), dim=-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("query")
    ap.add_argument("--index", default="index/feats.npy")
    ap.add_argument("--head", default="index/head.pt")
    ap.add_argument("-k", type=int, default=5)
    args = ap.parse_args()
    device = torch.device("cuda")

    encoder = QueryEncoder()
    encoder.head.load_state_dict(torch.load(args.head, map_location="cpu", weights_only=True))
    encoder.cuda()
    encoder.to_fp16()
    encoder.eval()

    index = torch.from_numpy(np.load(args.index, allow_pickle=False))
    index = index.to(device, non_blocking=True)

    tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    x = tf(Image.open(args.query).convert("RGB")).unsqueeze(0)
    x = x.cuda(non_blocking=True)
    with torch.inference_mode():
        q = encoder(x)
        scores = (index @ q.T).squeeze(1)
        top = scores.topk(args.k)
    for s, i in zip(top.values.tolist(), top.indices.tolist()):
        print(f"{i}\t{s:.4f}")


if __name__ == "__main__":
    main()
