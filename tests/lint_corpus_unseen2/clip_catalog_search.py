# shaped after swathyy18/StyleMatch-AI:chatbot/clip_utils.py (rewritten, not copied)
"""Index a product catalogue with CLIP and answer text queries against it."""
import json
import os

import clip
import numpy as np
import torch
from PIL import Image

device = "cuda" if torch.cuda.is_available() else "cpu"
model, preprocess = clip.load("ViT-B/32", device=device)

CATALOG_DIR = "static/catalog"
INDEX_PATH = "static/catalog_index.npy"
META_PATH = "static/catalog_meta.json"


def encode_text(text):
    tokens = clip.tokenize([text]).to(device)
    with torch.no_grad():
        feats = model.encode_text(tokens)
    feats = feats / feats.norm(dim=-1, keepdim=True)
    return feats.cpu().numpy()


def build_index():
    names, feats = [], []
    for fname in sorted(os.listdir(CATALOG_DIR)):
        if not fname.lower().endswith((".jpg", ".png")):
            continue
        image = Image.open(os.path.join(CATALOG_DIR, fname)).convert("RGB")
        image_input = preprocess(image).unsqueeze(0).to(device)
        with torch.no_grad():
            f = model.encode_image(image_input)
        feats.append(f / f.norm(dim=-1, keepdim=True))
        names.append(fname)
    index = torch.cat(feats).cpu().numpy().astype(np.float32)
    np.save(INDEX_PATH, index)
    with open(META_PATH, "w") as fh:
        json.dump(names, fh)
    return index, names


def search(query, k=5):
    if os.path.exists(INDEX_PATH):
        index = np.load(INDEX_PATH)
        with open(META_PATH) as fh:
            names = json.load(fh)
    else:
        index, names = build_index()
    q = encode_text(query)[0]
    scores = index @ q
    top = np.argsort(-scores)[:k]
    return [(names[i], float(scores[i])) for i in top]


if __name__ == "__main__":
    for name, score in search("red floral summer dress"):
        print(f"{score:.3f}  {name}")
