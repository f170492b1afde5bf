# shaped after BartSteer/testAIdeployment:app.py (rewritten, not copied)
"""Label a folder of scans with a fully-convolutional classifier; cropping is optional."""
import argparse
import json
from pathlib import Path

import torch
import torchvision.transforms.functional as TF
from PIL import Image

from scan_models import ScanNet


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--weights", default="weights/scannet.pt")
    ap.add_argument("--crop", action="store_true",
                    help="crop every scan to its central 512x512 first (default: the full scan)")
    args = ap.parse_args()

    net = ScanNet(num_classes=4)  # global pooling head: any input size works
    net.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    net.eval()

    results = {}
    with torch.no_grad():
        for path in sorted(Path(args.folder).glob("*.png")):
            img = Image.open(path).convert("L")
            if args.crop:
                img = TF.center_crop(img, [512, 512])
            x = TF.to_tensor(img).unsqueeze(0)
            probs = net(x).softmax(1)[0]
            results[path.name] = {"label": int(probs.argmax()), "p": round(float(probs.max()), 4)}

    Path("labels.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
