# shaped after Troppo99/VISUALAI:assets/learn/depth_detection.py (rewritten, not copied)
"""Depth for every n-th frame of a video (or the webcam); writes a side-by-side preview video."""
import argparse

import cv2
import numpy as np

from depthsvc.infer import estimate_depth, normalise


def colorize(depth):
    return cv2.applyColorMap((normalise(depth) * 255).astype(np.uint8), cv2.COLORMAP_INFERNO)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--video", default="0", help="path, or a camera index")
    ap.add_argument("--out", default="depth_preview.mp4")
    ap.add_argument("--every", type=int, default=2)
    args = ap.parse_args()

    cap = cv2.VideoCapture(int(args.video) if args.video.isdigit() else args.video)
    writer, depths, idx = None, [], 0
    while cap.isOpened():
        ret, frame = cap.read()
        if not ret:
            break
        idx += 1
        if idx % args.every:
            continue
        depth = estimate_depth(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), downsampling=2)
        depths.append(depth)
        vis = np.hstack([cv2.resize(frame, depth.shape[::-1]), colorize(depth)])
        if writer is None:
            h, w = vis.shape[:2]
            writer = cv2.VideoWriter(args.out, cv2.VideoWriter_fourcc(*"mp4v"), 15, (w, h))
        writer.write(vis)
    cap.release()
    if writer is not None:
        writer.release()
    np.save("depths.npy", np.stack(depths))
    print(f"{len(depths)} depth frames")


if __name__ == "__main__":
    main()
