"""Product-image tagging: CNN embedding -> PCA (fitted offline) -> class via label map."""

import argparse
import pickle

import joblib
import torch
from PIL import Image
from torchvision import models, transforms

tf = transforms.Compose(
    [
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]
)


def load_assets(args):
    with open(args.label_map, "rb") as f:
        idx_to_tag = pickle.load(f)
    pca = joblib.load(args.pca)
    net = models.mobilenet_v3_large(weights=models.MobileNet_V3_Large_Weights.DEFAULT)
    net.classifier = torch.nn.Identity()
    net.eval()
    return idx_to_tag, pca, net


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("images", nargs="+")
    ap.add_argument("--label-map", default="assets/idx_to_tag.pkl")
    ap.add_argument("--pca", default="assets/pca_64.joblib")
    ap.add_argument("--centroids", default="assets/centroids.pt")
    args = ap.parse_args()

    idx_to_tag, pca, net = load_assets(args)
    centroids = torch.load(args.centroids)
    batch = torch.stack([tf(Image.open(p).convert("RGB")) for p in args.images])
    with torch.no_grad():
        emb = net(batch).numpy()
    reduced = torch.from_numpy(pca.transform(emb)).float()
    nearest = torch.cdist(reduced, centroids).argmin(dim=1).tolist()
    for path, idx in zip(args.images, nearest):
        print(f"{path}\t{idx_to_tag[idx]}")


if __name__ == "__main__":
    main()
