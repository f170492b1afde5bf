"""SegFormer semantic segmentation demo on a folder of images (ADE20K labels)."""
import argparse
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from transformers import SegformerForSemanticSegmentation, SegformerImageProcessor


def ade_palette(n=150):
    rng = np.random.default_rng(3)
    return rng.integers(0, 255, size=(n, 3), dtype=np.uint8)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("seg_out"))
    parser.add_argument("--checkpoint", default="nvidia/segformer-b2-finetuned-ade-512-512")
    parser.add_argument("--alpha", type=float, default=0.5)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    processor = SegformerImageProcessor.from_pretrained(args.checkpoint)
    model = SegformerForSemanticSegmentation.from_pretrained(args.checkpoint)
    model.to(device)
    id2label = model.config.id2label
    palette = ade_palette(len(id2label))
    args.out.mkdir(parents=True, exist_ok=True)

    for path in sorted(args.images.glob("*.jpg")):
        image = Image.open(path).convert("RGB")
        inputs = processor(images=image, return_tensors="pt").to(device)
        with torch.no_grad():
            outputs = model(**inputs)
        logits = nn.functional.interpolate(
            outputs.logits, size=image.size[::-1], mode="bilinear", align_corners=False
        )
        seg = logits.argmax(dim=1)[0].cpu().numpy()
        color = palette[seg]
        blended = (np.asarray(image) * (1 - args.alpha) + color * args.alpha).astype(np.uint8)
        Image.fromarray(blended).save(args.out / f"{path.stem}_seg.png")
        present = [id2label[int(i)] for i in np.unique(seg)]
        print(f"{path.name}: {', '.join(present)}")


if __name__ == "__main__":
    main()
