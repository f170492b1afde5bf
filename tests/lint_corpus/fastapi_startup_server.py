"""FastAPI image classifier. The model is built once at startup, requests run under inference_mode."""

import io

import torch
from fastapi import FastAPI, File, UploadFile
from PIL import Image
from torchvision.models import EfficientNet_B0_Weights, efficientnet_b0

app = FastAPI(title="classifier")
model = None
preprocess = None
categories = []
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@app.on_event("startup")
def load_model():
    global model, preprocess, categories
    weights = EfficientNet_B0_Weights.DEFAULT
    model = efficientnet_b0(weights=weights)
    model.eval()
    model.to(device)
    preprocess = weights.transforms()
    categories = weights.meta["categories"]


@app.get("/healthz")
def healthz():
    return {"ready": model is not None}


@app.post("/classify")
async def classify(file: UploadFile = File(...)):
    data = await file.read()
    img = Image.open(io.BytesIO(data)).convert("RGB")
    x = preprocess(img).unsqueeze(0).to(device)
    with torch.inference_mode():
        probs = model(x).softmax(dim=1)[0]
    top = probs.topk(3)
    return {
        "predictions": [{"label": categories[i], "prob": p} for p, i in zip(top.values.tolist(), top.indices.tolist())]
    }
