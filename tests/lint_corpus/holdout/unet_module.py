"""UNet for binary segmentation, plus a frozen VGG feature extractor for a perceptual loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.block(x)


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        x = self.up(x)
        dy, dx = skip.size(2) - x.size(2), skip.size(3) - x.size(3)
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    def __init__(self, in_ch=3, n_classes=1, base=32):
        super().__init__()
        chs = [base * 2**i for i in range(5)]
        self.inc = DoubleConv(in_ch, chs[0])
        self.downs = nn.ModuleList([DoubleConv(chs[i], chs[i + 1]) for i in range(4)])
        self.ups = nn.ModuleList([Up(chs[i + 1], chs[i]) for i in reversed(range(4))])
        self.head = nn.Conv2d(chs[0], n_classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.head(x)


class FrozenVGGFeatures(nn.Module):
    """Perceptual-loss feature extractor: never trained, always in eval mode."""

    def __init__(self, layer_idx=16, pretrained=True):
        super().__init__()
        vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1" if pretrained else None)
        self.features = vgg.features[:layer_idx]
        self.requires_grad_(False)
        self.eval()

    def train(self, mode=True):
        return super().train(False)

    def forward(self, x):
        with torch.no_grad():
            return self.features(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    net = UNet(in_ch=3, n_classes=2)
    n_params = sum(p.numel() for p in net.parameters() if p.requires_grad)
    print(f"UNet: {n_params / 1e6:.2f}M params")
    net.eval()
    x = torch.randn(2, 3, 160, 224)
    with torch.no_grad():
        y = net(x)
    assert y.shape == (2, 2, 160, 224), y.shape

    vgg_feats = FrozenVGGFeatures(pretrained=False)
    f = vgg_feats(x)
    print("smoke test ok:", tuple(y.shape), tuple(f.shape))
