# shaped after ivanpanshin/field_area_segmentation:bash_scripts/test_seresnext_1stage.sh (rewritten, not copied)
"""Fold ensemble for a tile-classification competition: average the sigmoid of every fold."""
import os

import timm
import torch
from torch.utils.data import DataLoader

from mining_data import TileDataset

FOLDS = [0, 1, 2, 3, 4]
device = "cuda"


def load_fold(fold):
    net = timm.create_model("seresnext50_32x4d", pretrained=False, num_classes=1, drop_rate=0.3)
    state = torch.load(f"weights/fold{fold}/best.pt", map_location="cpu", weights_only=True)
    net.load_state_dict(state["model"])
    return net.to(device)


def main():
    ensemble = [load_fold(f) for f in FOLDS]
    loader = DataLoader(TileDataset("test_tiles"), batch_size=16, num_workers=2)
    rows = []
    with torch.inference_mode():
        for tiles, names in loader:
            tiles = tiles.to(device)
            score = torch.zeros(tiles.shape[0], device=device)
            for net in ensemble:
                score += torch.sigmoid(net(tiles)).squeeze(1)
            score = (score / len(ensemble)).cpu().tolist()
            rows.extend(zip(names, score))
    os.makedirs("sub", exist_ok=True)
    with open("sub/submission.csv", "w") as fh:
        fh.write("id,target\n")
        fh.writelines(f"{n},{s:.5f}\n" for n, s in rows)


if __name__ == "__main__":
    main()
