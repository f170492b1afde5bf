# shaped after ash-xyz/Neural-Artist:src/eval.py (rewritten, not copied)
import argparse
import re

import cv2
import torch
from torchvision import transforms

from src.transformer_net import TransformerNet
from src.utils import load_image, save_image

to_tensor = transforms.Compose([
    transforms.ToTensor(),
    transforms.Lambda(lambda x: x.mul(255)),
])


def load_style_model(path, device):
    style_model = TransformerNet()
    state_dict = torch.load(path, map_location="cpu")
    # old checkpoints still carry InstanceNorm running stats
    for k in list(state_dict.keys()):
        if re.search(r"in\d+\.running_(mean|var)$", k):
            del state_dict[k]
    style_model.load_state_dict(state_dict)
    style_model.eval()
    style_model.to(device)
    return style_model


def stylize_image(args, device):
    content = load_image(args.content, scale=args.content_scale)
    content = to_tensor(content).unsqueeze(0).to(device)
    style_model = load_style_model(args.model, device)
    with torch.no_grad():
        out = style_model(content).cpu()
    save_image(args.out, out[0])


def stylize_video(args, device):
    style_model = load_style_model(args.model, device)
    cap = cv2.VideoCapture(args.content)
    fps = cap.get(cv2.CAP_PROP_FPS)
    writer = None
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        frame_tensor = to_tensor(rgb).unsqueeze(0).to(device)
        with torch.no_grad():
            styled = style_model(frame_tensor)
        styled = styled[0].clamp(0, 255).permute(1, 2, 0).byte().cpu().numpy()
        if writer is None:
            h, w = styled.shape[:2]
            writer = cv2.VideoWriter(args.out, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        writer.write(cv2.cvtColor(styled, cv2.COLOR_RGB2BGR))
    cap.release()
    if writer is not None:
        writer.release()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="fast neural style: eval")
    parser.add_argument("--content", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--content-scale", type=float, default=None)
    parser.add_argument("--video", action="store_true")
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda" if args.cuda else "cpu")
    if args.video:
        stylize_video(args, device)
    else:
        stylize_image(args, device)
