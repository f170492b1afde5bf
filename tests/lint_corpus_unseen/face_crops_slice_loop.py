# shaped after Sonam-196/AttendenceSystem:extract_embeddings.py (rewritten, not copied)
"""Enrol employees: embed every aligned 112x112 face crop and save one mean vector per person."""
import os
from collections import defaultdict

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from facekit.backbones import iresnet50

CROPS_DIR = "aligned_enrolled"


def load_crops(folder):
    names, arrays = [], []
    for fname in sorted(os.listdir(folder)):
        img = cv2.imread(os.path.join(folder, fname))
        img = cv2.resize(img, (112, 112))[:, :, ::-1]
        arrays.append(((img.astype(np.float32) / 255.0) - 0.5) / 0.5)
        names.append(fname.split("_")[0])
    crops = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
    return names, crops


def main():
    net = iresnet50(num_features=512)
    net.load_state_dict(torch.load("weights/arcface_r50.pth", map_location="cpu", weights_only=True))
    net.eval().cuda()

    names, images = load_crops(CROPS_DIR)
    images.cuda()

    per_person = defaultdict(list)
    with torch.no_grad():
        for i in range(len(names)):
            emb = net(images[i:i + 1])
            per_person[names[i]].append(F.normalize(emb, dim=1)[0].cpu().numpy())

    gallery = {name: np.mean(v, axis=0) for name, v in per_person.items()}
    np.save("face_embeddings.npy", gallery)
    print(f"enrolled {len(gallery)} people from {len(names)} crops")


if __name__ == "__main__":
    main()
