# shaped after meijieru/crnn.pytorch:demo.py (rewritten, not copied)
"""Recognise every cropped text line in a folder; prints raw and collapsed CTC paths."""
import argparse
import glob
import os

import torch
from torch.autograd import Variable

import models.crnn as crnn
import utils

alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", default="./data/lines", help="folder of cropped line images")
    parser.add_argument("--model", default="./data/crnn.pth")
    parser.add_argument("--dump", default=None, help="optional .pt file for the raw logits")
    args = parser.parse_args()

    model = crnn.CRNN(32, 1, len(alphabet) + 1, 256)
    if torch.cuda.is_available():
        model = model.cuda()
    print("loading pretrained model from %s" % args.model)
    model.load_state_dict(torch.load(args.model))
    model.eval()
    converter = utils.strLabelConverter(alphabet)

    raw_outputs = {}
    for img_path in sorted(glob.glob(os.path.join(args.images, "*.png"))):
        image = utils.load_line_image(img_path)
        if torch.cuda.is_available():
            image = image.cuda()
        image = image.view(1, *image.size())
        image = Variable(image)

        preds = model(image)
        raw_outputs[os.path.basename(img_path)] = preds

        _, best = preds.max(2)
        best = best.transpose(1, 0).contiguous().view(-1)
        preds_size = Variable(torch.IntTensor([best.size(0)]))
        raw_pred = converter.decode(best.data, preds_size.data, raw=True)
        sim_pred = converter.decode(best.data, preds_size.data, raw=False)
        print("%-30s %-26s => %s" % (os.path.basename(img_path), raw_pred, sim_pred))

    if args.dump:
        torch.save(raw_outputs, args.dump)


if __name__ == "__main__":
    main()
