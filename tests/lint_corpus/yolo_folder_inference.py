"""Count people per image in a folder with an off-the-shelf YOLOv8 model."""

import argparse
import csv
from pathlib import Path

from ultralytics import YOLO

PERSON = 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--weights", default="yolov8n.pt")
    parser.add_argument("--conf", type=float, default=0.35)
    parser.add_argument("--out", default="counts.csv")
    args = parser.parse_args()

    model = YOLO(args.weights)
    images = sorted(p for p in Path(args.folder).iterdir() if p.suffix.lower() in {".jpg", ".png"})

    detections = []
    for path in images:
        results = model(str(path), conf=args.conf, verbose=False)
        boxes = results[0].boxes
        people = boxes.xyxy[boxes.cls == PERSON]
        detections.append({"image": path.name, "count": len(people), "boxes": people.tolist()})

    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["image", "count"])
        writer.writeheader()
        for det in detections:
            writer.writerow({"image": det["image"], "count": det["count"]})
    print(f"{sum(d['count'] for d in detections)} people in {len(images)} images")


if __name__ == "__main__":
    main()
