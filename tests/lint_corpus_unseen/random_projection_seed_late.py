# shaped after zjykzj/SimpleIR:tools/retrieval/README.md (rewritten, not copied)
"""Extract gallery features with a pretrained ResNet-50 and compress them with a random projection."""
import argparse

import numpy as np
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.models import ResNet50_Weights, resnet50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image_dir")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="gallery_feats.npz")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    backbone = resnet50(weights=ResNet50_Weights.IMAGENET1K_V2)
    backbone.fc = torch.nn.Identity()
    backbone.eval().to(device)

    # Johnson-Lindenstrauss projection 2048 -> dim, shared by gallery and queries
    proj = torch.randn(2048, args.dim, device=device) / args.dim ** 0.5
    torch.manual_seed(args.seed)

    tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(args.image_dir, tf)
    loader = DataLoader(ds, batch_size=64, shuffle=False, num_workers=0)

    feats, labels = [], []
    with torch.no_grad():
        for images, target in loader:
            f = backbone(images.to(device)) @ proj
            feats.append(torch.nn.functional.normalize(f, dim=1).cpu().numpy())
            labels.append(target.numpy())
    np.savez(args.out, feats=np.concatenate(feats), labels=np.concatenate(labels), proj=proj.cpu().numpy())


if __name__ == "__main__":
    main()
