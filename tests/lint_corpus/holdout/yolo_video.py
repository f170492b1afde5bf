"""Track people in a video with YOLOv8 and write an annotated copy with per-track trails."""
import argparse
from collections import defaultdict

import cv2
import numpy as np
from ultralytics import YOLO


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--weights", default="yolov8n.pt")
    ap.add_argument("--out", default="tracked.mp4")
    ap.add_argument("--conf", type=float, default=0.35)
    args = ap.parse_args()

    model = YOLO(args.weights)
    model(np.zeros((720, 1280, 3), dtype=np.uint8), verbose=False)  # warm-up
    cap = cv2.VideoCapture(args.source)
    fps = cap.get(cv2.CAP_PROP_FPS) or 25
    n_frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    writer = cv2.VideoWriter(args.out, cv2.VideoWriter_fourcc(*"mp4v"), fps, (1280, 720))
    trails = defaultdict(list)
    counts = []

    for frame_idx in range(n_frames):
        ok, frame = cap.read()
        if not ok:
            break
        frame = cv2.resize(frame, (1280, 720))
        results = model.track(frame, persist=True, classes=[0], conf=args.conf, verbose=False)
        boxes = results[0].boxes
        annotated = results[0].plot()
        if boxes.id is not None:
            ids = boxes.id.int().cpu().tolist()
            for tid, (x, y, w, h) in zip(ids, boxes.xywh.cpu().numpy()):
                trails[tid].append((float(x), float(y)))
                pts = np.array(trails[tid][-30:], dtype=np.int32).reshape(-1, 1, 2)
                cv2.polylines(annotated, [pts], False, (230, 230, 230), 2)
        counts.append(len(boxes))
        writer.write(annotated)
        if frame_idx % 100 == 0:
            print(f"frame {frame_idx}/{n_frames}: {len(boxes)} people")

    cap.release()
    writer.release()
    print(f"mean people per frame: {np.mean(counts):.2f}")


if __name__ == "__main__":
    main()
