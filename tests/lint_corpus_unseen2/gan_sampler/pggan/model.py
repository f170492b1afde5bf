# shaped after hphp777/GraduationProject:GAN_research/PGGAN/model.py (rewritten, not copied)
"""Progressive-growing generator: equalized-lr convs, pixel norm, fade-in between resolutions."""
import torch
import torch.nn as nn
import torch.nn.functional as F

factors = [1, 1, 1, 1, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32]


class WSConv2d(nn.Module):
    """Weight-scaled conv (equalized learning rate): scale the input instead of the weights."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, gain=2):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)
        self.scale = (gain / (in_channels * kernel_size ** 2)) ** 0.5
        self.bias = self.conv.bias
        self.conv.bias = None
        nn.init.normal_(self.conv.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x):
        return self.conv(x * self.scale) + self.bias.view(1, -1, 1, 1)


class PixelNorm(nn.Module):
    def forward(self, x):
        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, use_pixelnorm=True):
        super().__init__()
        self.conv1 = WSConv2d(in_channels, out_channels)
        self.conv2 = WSConv2d(out_channels, out_channels)
        self.leaky = nn.LeakyReLU(0.2)
        self.pn = PixelNorm() if use_pixelnorm else nn.Identity()

    def forward(self, x):
        x = self.pn(self.leaky(self.conv1(x)))
        return self.pn(self.leaky(self.conv2(x)))


class Generator(nn.Module):
    def __init__(self, z_dim, in_channels, img_channels=1):
        super().__init__()
        self.initial = nn.Sequential(
            PixelNorm(),
            nn.ConvTranspose2d(z_dim, in_channels, 4, 1, 0),  # 1x1 -> 4x4
            nn.LeakyReLU(0.2),
            WSConv2d(in_channels, in_channels),
            nn.LeakyReLU(0.2),
            PixelNorm(),
        )
        self.initial_rgb = WSConv2d(in_channels, img_channels, kernel_size=1, padding=0)
        self.prog_blocks = nn.ModuleList()
        self.rgb_layers = nn.ModuleList([self.initial_rgb])
        for i in range(len(factors) - 1):
            c_in, c_out = int(in_channels * factors[i]), int(in_channels * factors[i + 1])
            self.prog_blocks.append(ConvBlock(c_in, c_out))
            self.rgb_layers.append(WSConv2d(c_out, img_channels, kernel_size=1, padding=0))

    @staticmethod
    def fade_in(alpha, upscaled, generated):
        return torch.tanh(alpha * generated + (1 - alpha) * upscaled)

    def forward(self, x, alpha, steps):
        out = self.initial(x)
        if steps == 0:
            return self.initial_rgb(out)
        for step in range(steps):
            upscaled = F.interpolate(out, scale_factor=2, mode="nearest")
            out = self.prog_blocks[step](upscaled)
        return self.fade_in(alpha, self.rgb_layers[steps - 1](upscaled), self.rgb_layers[steps](out))
