# shaped after khayweee/Datascience:Pytorch/12_flask_pytorch/app/main.py (rewritten, not copied)
"""Flask front end: POST an image of a handwritten digit, get the digit back."""
import io

import torch
import torchvision.transforms as T
from flask import Flask, jsonify, request
from PIL import Image

from model import model

app = Flask(__name__)
ALLOWED = {"png", "jpg", "jpeg"}

transform = T.Compose([
    T.Grayscale(num_output_channels=1),
    T.Resize((28, 28)),
    T.ToTensor(),
    T.Normalize((0.1307,), (0.3081,)),
])


def allowed_file(name):
    return "." in name and name.rsplit(".", 1)[1].lower() in ALLOWED


@app.route("/predict", methods=["POST"])
def predict():
    file = request.files.get("file")
    if file is None or not allowed_file(file.filename):
        return jsonify({"error": "send a png or jpg as 'file'"}), 400
    tensor = transform(Image.open(io.BytesIO(file.read()))).unsqueeze(0)
    with torch.no_grad():
        log_probs = model(tensor)
    pred = int(log_probs.argmax(1).item())
    return jsonify({"prediction": pred, "confidence": float(log_probs.exp().max())})


if __name__ == "__main__":
    app.run(host="0.0.0.0", port=5000)
