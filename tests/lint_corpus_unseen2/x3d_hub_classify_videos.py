# shaped after facebookresearch/pytorchvideo:website/docs/tutorial_torchhub_inference.md (rewritten, not copied)
"""Classify every clip in a folder with the torch.hub X3D-S Kinetics-400 model."""
import json
import os
import sys

import torch
from pytorchvideo.data.encoded_video import EncodedVideo
from pytorchvideo.transforms import ApplyTransformToKey, ShortSideScale, UniformTemporalSubsample
from torchvision.transforms import CenterCrop, Compose, Lambda
from torchvision.transforms._transforms_video import NormalizeVideo

device = "cuda" if torch.cuda.is_available() else "cpu"
model_name = "x3d_s"
model = torch.hub.load("facebookresearch/pytorchvideo", model_name, pretrained=True)
model = model.eval().to(device)

with open("kinetics_classnames.json") as f:
    classnames = {v: k.replace('"', "") for k, v in json.load(f).items()}

mean, std = [0.45, 0.45, 0.45], [0.225, 0.225, 0.225]
params = {"x3d_xs": dict(side=182, crop=182, frames=4, rate=12),
          "x3d_s": dict(side=182, crop=182, frames=13, rate=6)}[model_name]
clip_seconds = params["frames"] * params["rate"] / 30

transform = ApplyTransformToKey(
    key="video",
    transform=Compose([
        UniformTemporalSubsample(params["frames"]),
        Lambda(lambda x: x / 255.0),
        NormalizeVideo(mean, std),
        ShortSideScale(size=params["side"]),
        CenterCrop((params["crop"], params["crop"])),
    ]),
)

video_dir = sys.argv[1]
for name in sorted(os.listdir(video_dir)):
    video = EncodedVideo.from_path(os.path.join(video_dir, name))
    clip = video.get_clip(start_sec=0, end_sec=clip_seconds)
    inputs = transform(clip)["video"].to(device)
    preds = model(inputs[None, ...])
    top5 = torch.nn.functional.softmax(preds, dim=1).topk(k=5).indices[0]
    print(name, ", ".join(classnames[int(i)] for i in top5))
