# shaped after hepromark/ToyotaChallenge2023:Cv_to_pytorch.py (rewritten, not copied)
"""Classify the frames of a recorded inspection video (part OK / defect) and log the defect frames."""
import sys

import cv2
import numpy as np
import torch

from inspect_net import InspectNet

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

model = InspectNet(num_classes=2)
model.load_state_dict(torch.load("weights/inspect_best.pt", map_location="cpu", weights_only=True))
model.eval()

cap = cv2.VideoCapture(sys.argv[1])
defects = []
frame_idx = 0
with torch.no_grad():
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        img = cv2.resize(frame, (320, 320))[:, :, ::-1].astype(np.float32) / 255.0
        img = (img - MEAN) / STD
        x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).unsqueeze(0)
        prob = model(x).softmax(1)[0, 1].item()
        if prob > 0.5:
            defects.append((frame_idx, round(prob, 3)))
        frame_idx += 1
cap.release()

print(f"{len(defects)} defect frames of {frame_idx}")
for idx, p in defects:
    print(idx, p)
