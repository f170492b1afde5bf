# shaped after jerryinlost/collection.2024:convert/pytorch2onnx.mobilenet_v2.py (rewritten, not copied)
"""A small MobileNetV3-style network for 32x32 inputs upsampled to 224."""
import torch.nn as nn


def conv_bn(cin, cout, k=3, s=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.Hardswish())


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, expand, stride):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride, groups=mid),
                                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes=10, width=16, dropout=0.2):
        super().__init__()
        cfg = [(16, 1, 2), (24, 4, 2), (24, 3, 1), (40, 6, 2), (48, 3, 1), (96, 6, 2)]
        layers, cin = [conv_bn(3, width, 3, 2)], width
        for cout, expand, stride in cfg:
            layers.append(InvertedResidual(cin, cout, expand, stride))
            cin = cout
        self.features = nn.Sequential(*layers, conv_bn(cin, 576, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(dropout),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))
