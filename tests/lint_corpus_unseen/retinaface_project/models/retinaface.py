# shaped after biubug6/Pytorch_Retinaface:models/retinaface.py (rewritten, not copied)
"""RetinaFace with a MobileNet-0.25 backbone: boxes, scores and five landmarks per anchor."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models._utils import IntermediateLayerGetter

from models.backbones import MobileNetV1, FPN, SSH


class Head(nn.Module):
    def __init__(self, in_ch, num_anchors, out_per_anchor):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, num_anchors * out_per_anchor, kernel_size=1)
        self.out = out_per_anchor

    def forward(self, x):
        y = self.conv(x).permute(0, 2, 3, 1).contiguous()
        return y.view(y.shape[0], -1, self.out)


class RetinaFace(nn.Module):
    def __init__(self, cfg, phase="train"):
        super().__init__()
        self.phase = phase
        self.body = IntermediateLayerGetter(MobileNetV1(), cfg["return_layers"])
        in_list = [cfg["in_channel"] * m for m in (2, 4, 8)]
        self.fpn = FPN(in_list, cfg["out_channel"])
        self.ssh = nn.ModuleList(SSH(cfg["out_channel"], cfg["out_channel"]) for _ in range(3))
        self.bbox = nn.ModuleList(Head(cfg["out_channel"], 2, 4) for _ in range(3))
        self.cls = nn.ModuleList(Head(cfg["out_channel"], 2, 2) for _ in range(3))
        self.ldm = nn.ModuleList(Head(cfg["out_channel"], 2, 10) for _ in range(3))

    def forward(self, x):
        feats = [ssh(f) for ssh, f in zip(self.ssh, self.fpn(self.body(x)))]
        loc = torch.cat([h(f) for h, f in zip(self.bbox, feats)], dim=1)
        conf = torch.cat([h(f) for h, f in zip(self.cls, feats)], dim=1)
        ldm = torch.cat([h(f) for h, f in zip(self.ldm, feats)], dim=1)
        if self.phase == "test":
            conf = F.softmax(conf, dim=-1)
        return loc, conf, ldm


def build_retinaface(cfg, phase="test"):
    return RetinaFace(cfg, phase=phase)
