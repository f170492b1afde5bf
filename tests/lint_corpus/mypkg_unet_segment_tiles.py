"""Segment a folder of 512x512 satellite tiles with our UNet and save the masks as PNGs."""

import argparse
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader

from mypkg.data import TileDataset
from mypkg.models import UNet


def parse_args():
    p = argparse.ArgumentParser(description="batch segmentation of tiles")
    p.add_argument("--tiles", required=True, help="folder with .tif tiles")
    p.add_argument("--weights", default="checkpoints/unet_best.pth")
    p.add_argument("--out", default="masks")
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    return p.parse_args()


def save_mask(mask: np.ndarray, path: Path) -> None:
    Image.fromarray((mask * 255).astype(np.uint8)).save(path)


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    model = UNet(n_channels=3, n_classes=args.classes, bilinear=True)
    model.load_state_dict(torch.load(args.weights, map_location=device))
    model.to(device)

    dataset = TileDataset(args.tiles, size=512)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False, num_workers=4)

    with torch.no_grad():
        for images, names in loader:
            images = images.to(device)
            masks = model(images).argmax(dim=1).cpu().numpy()
            for mask, name in zip(masks, names):
                save_mask(mask, out_dir / f"{Path(name).stem}.png")
    print(f"wrote {len(dataset)} masks to {out_dir}")


if __name__ == "__main__":
    main()
