# shaped after mitzen/pytorch_restnet_flask_app:export-model.py (rewritten, not copied)
"""Flask REST API around a pretrained DenseNet-121 (ImageNet classes)."""
import io
import json

import torchvision.transforms as transforms
from flask import Flask, jsonify, request
from PIL import Image
from torchvision import models

app = Flask(__name__)
imagenet_class_index = json.load(open("imagenet_class_index.json"))
model = models.densenet121(weights="IMAGENET1K_V1")
model.eval()


def transform_image(image_bytes):
    my_transforms = transforms.Compose([
        transforms.Resize(255),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    image = Image.open(io.BytesIO(image_bytes)).convert("RGB")
    return my_transforms(image).unsqueeze(0)


def get_prediction(image_bytes):
    tensor = transform_image(image_bytes=image_bytes)
    outputs = model.forward(tensor)
    _, y_hat = outputs.max(1)
    predicted_idx = str(y_hat.item())
    return imagenet_class_index[predicted_idx]


@app.route("/predict", methods=["POST"])
def predict():
    if request.method == "POST":
        file = request.files["file"]
        class_id, class_name = get_prediction(image_bytes=file.read())
        return jsonify({"class_id": class_id, "class_name": class_name})


@app.route("/health")
def health():
    return jsonify({"ok": True})


if __name__ == "__main__":
    app.run(host="0.0.0.0", port=5000)
