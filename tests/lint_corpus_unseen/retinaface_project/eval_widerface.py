# shaped after biubug6/Pytorch_Retinaface:test_widerface.py (rewritten, not copied)
"""Produce WIDER FACE val predictions for the official evaluation kit."""
import argparse

import torch

from data.config import cfg_mnet
from models.retinaface import build_retinaface
from utils.checkpoint import load_model
from utils.evaluate import run_on_folder, write_widerface_txt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--trained_model", default="weights/mobilenet0.25_Final.pth")
    ap.add_argument("--folder", default="data/widerface/val/images")
    ap.add_argument("--save_folder", default="widerface_txt/")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()

    net = build_retinaface(cfg_mnet, phase="test")
    net = load_model(net, args.trained_model, load_to_cpu=args.cpu)
    net.eval()
    device = torch.device("cpu" if args.cpu else "cuda")
    net = net.to(device)

    results = run_on_folder(net, args.folder, device, cfg_mnet)
    write_widerface_txt(results, args.save_folder)
    print(f"wrote {len(results)} files to {args.save_folder}")


if __name__ == "__main__":
    main()
