# shaped after RedisAI/benchmarks:experiments/_pytorch/_flask/app.py (rewritten, not copied)
"""HTTP front end: POST an image, get a 16-bit PNG depth map (or the raw network output)."""
import io

import cv2
import numpy as np
import torch
from fastapi import FastAPI, File, UploadFile
from fastapi.responses import Response

from depthsvc.infer import estimate_depth, normalise, to_batch
from depthsvc.midas_model import midas

app = FastAPI(title="depth")


@app.on_event("startup")
def warm_up():
    estimate_depth(np.zeros((480, 640, 3), dtype=np.uint8))


def _decode(data):
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


@app.post("/depth")
async def depth(file: UploadFile = File(...)):
    rgb = _decode(await file.read())
    d = normalise(estimate_depth(rgb))
    ok, png = cv2.imencode(".png", (d * 65535).astype(np.uint16))
    return Response(content=png.tobytes(), media_type="image/png")


@app.post("/raw")
@torch.inference_mode()
def raw(file: UploadFile = File(...)):
    rgb = _decode(file.file.read())
    out = midas(to_batch(rgb))[0].cpu().numpy().astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, out)
    return Response(content=buf.getvalue(), media_type="application/octet-stream")
