"""Classify one chest X-ray with a DenseNet-121 fine-tuned on our labels."""

import argparse
import json

import torch
from PIL import Image
from torchvision import models, transforms

LABELS = ["normal", "pneumonia", "effusion", "cardiomegaly"]

preprocess = transforms.Compose(
    [
        transforms.Grayscale(num_output_channels=3),
        transforms.Resize((224, 224)),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image")
    ap.add_argument("--weights", default="densenet121_cxr.pth")
    args = ap.parse_args()

    model = models.densenet121(num_classes=len(LABELS))
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()

    img = preprocess(Image.open(args.image)).unsqueeze(0)
    if torch.cuda.is_available():
        model.cuda()
        img.cuda()

    with torch.no_grad():
        probs = torch.sigmoid(model(img))[0].tolist()
    print(json.dumps(dict(zip(LABELS, probs)), indent=2))


if __name__ == "__main__":
    main()
