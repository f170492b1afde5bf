"""Tiny Flask service that classifies an uploaded image with an ImageNet ResNet-50."""

import io
import os

import torch
from flask import Flask, jsonify, request
from PIL import Image
from torchvision.models import ResNet50_Weights, resnet50

app = Flask(__name__)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOPK = int(os.environ.get("TOPK", "5"))

weights = ResNet50_Weights.IMAGENET1K_V2
preprocess = weights.transforms()
categories = weights.meta["categories"]

model = resnet50(weights=weights)
model.to(DEVICE)


@app.route("/health")
def health():
    return jsonify(status="ok", device=DEVICE)


@app.route("/predict", methods=["POST"])
def predict():
    if "file" not in request.files:
        return jsonify(error="no file"), 400
    raw = request.files["file"].read()
    img = Image.open(io.BytesIO(raw)).convert("RGB")
    batch = preprocess(img).unsqueeze(0).to(DEVICE)
    with torch.no_grad():
        logits = model(batch)
    probs = logits.softmax(dim=1)[0]
    top = torch.topk(probs, TOPK)
    return jsonify(
        predictions=[
            {"label": categories[i], "score": round(p, 4)} for p, i in zip(top.values.tolist(), top.indices.tolist())
        ]
    )


if __name__ == "__main__":
    app.run(host="0.0.0.0", port=int(os.environ.get("PORT", "8000")))
