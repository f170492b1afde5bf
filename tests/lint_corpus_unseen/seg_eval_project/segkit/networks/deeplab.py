# shaped after dmswl0707/Object-Segmentation-for-Vehicle-breakage-detection:inference.py (rewritten, not copied)
"""DeepLabV3+ with a torchvision ResNet backbone."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models import resnet50


class ASPP(nn.Module):
    def __init__(self, cin, cout=256, rates=(6, 12, 18)):
        super().__init__()
        self.branches = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())]
            + [nn.Sequential(nn.Conv2d(cin, cout, 3, padding=r, dilation=r, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU()) for r in rates])
        self.project = nn.Sequential(nn.Conv2d(cout * (len(rates) + 1), cout, 1, bias=False),
                                     nn.BatchNorm2d(cout), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x):
        return self.project(torch.cat([b(x) for b in self.branches], dim=1))


class DeepLabV3Plus(nn.Module):
    def __init__(self, num_classes, pretrained_backbone=False):
        super().__init__()
        r = resnet50(weights="IMAGENET1K_V2" if pretrained_backbone else None,
                     replace_stride_with_dilation=[False, True, True])
        self.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1)
        self.deep = nn.Sequential(r.layer2, r.layer3, r.layer4)
        self.aspp = ASPP(2048)
        self.low = nn.Sequential(nn.Conv2d(256, 48, 1, bias=False), nn.BatchNorm2d(48), nn.ReLU())
        self.classifier = nn.Sequential(nn.Conv2d(304, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256),
                                        nn.ReLU(), nn.Conv2d(256, num_classes, 1))

    def forward(self, x):
        low = self.stem(x)
        high = F.interpolate(self.aspp(self.deep(low)), size=low.shape[-2:], mode="bilinear", align_corners=False)
        out = self.classifier(torch.cat([self.low(low), high], dim=1))
        return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)
