# shaped after maryamsaad2205274/gradprojectds05:load_model.py (rewritten, not copied)
"""Run the trained HRNet keypoint head over a folder of person crops and save overlays."""
import glob
import os

import cv2
import numpy as np
import torch

from posekit.hrnet import HRNetKeypoint
from posekit.heatmaps import heatmaps_to_coords

CKPT_PATH = "runs/hrnet_w32/best.pth"
IMG_DIR = "data/crops"
OUT_DIR = "outputs/keypoints"
HEATMAP_SIZE = (64, 48)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

os.makedirs(OUT_DIR, exist_ok=True)
device = "cuda" if torch.cuda.is_available() else "cpu"

# Re-create the model exactly as in training
model = HRNetKeypoint(num_keypoints=17, heatmap_size=HEATMAP_SIZE).to(device)
ckpt = torch.load(CKPT_PATH, map_location=device)
state = ckpt["model"] if "model" in ckpt else ckpt.get("model_state_dict", ckpt)
model.load_state_dict(state)
model.eval()
print("loaded", CKPT_PATH)


def preprocess(bgr):
    img = cv2.resize(bgr, (192, 256))
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0
    img = (img - MEAN) / STD
    return torch.from_numpy(img.transpose(2, 0, 1))


def draw(bgr, coords, scale_x, scale_y):
    for x, y, conf in coords:
        if conf < 0.3:
            continue
        cv2.circle(bgr, (int(x * scale_x), int(y * scale_y)), 3, (0, 255, 0), -1)
    return bgr


paths = sorted(glob.glob(os.path.join(IMG_DIR, "*.jpg")))
for path in paths:
    bgr = cv2.imread(path)
    h, w = bgr.shape[:2]
    x = preprocess(bgr).unsqueeze(0).to(device)
    with torch.no_grad():
        heatmaps = model(x)
    coords = heatmaps_to_coords(heatmaps[0].cpu().numpy())
    sx = w / HEATMAP_SIZE[1]
    sy = h / HEATMAP_SIZE[0]
    out = draw(bgr.copy(), coords, sx, sy)
    cv2.imwrite(os.path.join(OUT_DIR, os.path.basename(path)), out)
print("done", len(paths))
