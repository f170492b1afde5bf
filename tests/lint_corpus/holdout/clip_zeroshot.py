"""Zero-shot image classification with CLIP over a folder of product photos."""
import argparse
import json
from pathlib import Path

import torch
from PIL import Image
from transformers import CLIPModel, CLIPProcessor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=Path, required=True)
    ap.add_argument("--labels", default="shoe,bag,watch,shirt,hat,sunglasses")
    ap.add_argument("--model", default="openai/clip-vit-base-patch32")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", default="zeroshot.json")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = CLIPModel.from_pretrained(args.model).to(device)
    processor = CLIPProcessor.from_pretrained(args.model)

    classes = [c.strip() for c in args.labels.split(",")]
    prompts = [f"a photo of a {c}" for c in classes]
    paths = sorted(p for p in args.images.iterdir() if p.suffix.lower() in {".jpg", ".jpeg", ".png"})

    results = []
    for start in range(0, len(paths), args.batch_size):
        batch_paths = paths[start:start + args.batch_size]
        images = [Image.open(p).convert("RGB") for p in batch_paths]
        inputs = processor(text=prompts, images=images, return_tensors="pt", padding=True).to(device)
        outputs = model(**inputs)
        probs = outputs.logits_per_image.softmax(dim=1)
        for path, row in zip(batch_paths, probs.tolist()):
            best = max(range(len(classes)), key=row.__getitem__)
            results.append({"image": path.name, "label": classes[best], "score": round(row[best], 4)})

    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"classified {len(results)} images")


if __name__ == "__main__":
    main()
