"""Tag a folder of screenshots with a fine-tuned ViT; images are preprocessed by the HF image processor."""

import argparse
import json
from pathlib import Path

import torch
from PIL import Image
from transformers import AutoImageProcessor, ViTForImageClassification


def batched(seq, size):
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--model", default="our-org/vit-screenshot-tags")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    processor = AutoImageProcessor.from_pretrained(args.model)
    model = ViTForImageClassification.from_pretrained(args.model)
    model.to(device)
    id2label = model.config.id2label

    paths = sorted(Path(args.folder).glob("*.png"))
    tags = {}
    for group in batched(paths, args.batch_size):
        images = [Image.open(p).convert("RGB") for p in group]
        inputs = processor(images=images, return_tensors="pt").to(device)
        with torch.no_grad():
            logits = model(**inputs).logits
        for p, k in zip(group, logits.argmax(-1).tolist()):
            tags[p.name] = id2label[k]

    print(json.dumps(tags, indent=2))


if __name__ == "__main__":
    main()
