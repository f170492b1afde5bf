# shaped after clovaai/deep-text-recognition-benchmark:demo.py (rewritten, not copied)
"""Recognize the text of cropped word images with a CTC recognizer and print a confidence per word."""
import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from strkit.converters import CTCLabelConverter
from strkit.data import AlignCollate, RawWordImages
from strkit.model import TextRecognizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image_folder", required=True)
    ap.add_argument("--saved_model", required=True)
    ap.add_argument("--character", default="0123456789abcdefghijklmnopqrstuvwxyz")
    ap.add_argument("--batch_size", type=int, default=192)
    args = ap.parse_args()

    random.seed(1111)
    np.random.seed(1111)
    torch.manual_seed(1111)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    converter = CTCLabelConverter(args.character)
    model = TextRecognizer(num_class=len(converter.character), img_h=32, img_w=100)
    model.load_state_dict(torch.load(args.saved_model, map_location=device, weights_only=True))
    model = model.to(device)
    model.eval()

    data = RawWordImages(root=args.image_folder)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False, num_workers=4,
                        collate_fn=AlignCollate(img_h=32, img_w=100, keep_ratio_with_pad=False))

    all_preds, all_paths = [], []
    for images, paths in loader:
        preds = model(images.to(device))
        all_preds.append(preds)
        all_paths.append(paths)

    for preds, paths in zip(all_preds, all_paths):
        conf, idx = F.softmax(preds, dim=2).max(2)
        sizes = torch.IntTensor([preds.size(1)] * preds.size(0))
        texts = converter.decode(idx.cpu(), sizes)
        for path, text, c in zip(paths, texts, conf.cumprod(dim=1)[:, -1].tolist()):
            print(f"{path}\t{text}\t{c:.4f}")


if __name__ == "__main__":
    main()
