"""CRNN text-line recognizer: greedy CTC decoding over a folder of cropped word images."""
import argparse
import glob
import os

import torch
import torch.nn as nn
import torchvision.transforms as T
from PIL import Image

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


class CRNN(nn.Module):
    def __init__(self, num_classes, hidden=256):
        super().__init__()

        def block(cin, cout, pool):
            layers = [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            if pool:
                layers.append(nn.MaxPool2d(pool))
            return layers

        self.cnn = nn.Sequential(
            *block(1, 64, (2, 2)), *block(64, 128, (2, 2)),
            *block(128, 256, None), *block(256, 256, (2, 1)),
            *block(256, 512, None), *block(512, 512, (2, 1)),
            *block(512, 512, (2, 1)),
        )
        self.rnn = nn.LSTM(512, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, num_classes)

    def forward(self, x):
        f = self.cnn(x)                      # B, C, 1, W'
        f = f.squeeze(2).permute(2, 0, 1)    # W', B, C
        out, _ = self.rnn(f)
        return self.fc(out)                  # T, B, num_classes


def ctc_greedy_decode(indices, blank=0):
    chars, prev = [], blank
    for idx in indices:
        if idx != blank and idx != prev:
            chars.append(ALPHABET[idx - 1])
        prev = idx
    return "".join(chars)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weights", default="checkpoints/crnn_best.pth")
    p.add_argument("--images", default="crops")
    p.add_argument("--height", type=int, default=32)
    args = p.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = CRNN(num_classes=len(ALPHABET) + 1)
    model.load_state_dict(torch.load(args.weights, map_location=device))
    model.to(device)
    model.eval()

    transform = T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))])
    paths = sorted(glob.glob(os.path.join(args.images, "*.png")))
    with torch.no_grad():
        for path in paths:
            img = Image.open(path).convert("L")
            w, h = img.size
            new_w = max(int(w * args.height / h), args.height)
            img = img.resize((new_w, args.height), Image.BILINEAR)
            x = transform(img).to(device)
            logits = model(x.unsqueeze(0))
            best = logits.argmax(dim=2).squeeze(1).cpu().tolist()
            print(f"{os.path.basename(path)}\t{ctc_greedy_decode(best)}")


if __name__ == "__main__":
    main()
