"""Built-in demo models (``demo:NAME``): small, seeded, seconds on two CPU cores."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from samebits.determinism.rng import isolate_rng


class MLP(nn.Module):
    """Linear-heavy: on many CPUs a row's bits change with the batch size (GEMM kernel choice)."""

    def __init__(self, d_in: int = 256, hidden: int = 1024, d_out: int = 16) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(d_in, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    """Convolutions with BatchNorm and a linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.stem(x)).mean(dim=(2, 3)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Token embedding, causal SDPA attention, LayerNorm and MLP blocks, a vocabulary head."""

    def __init__(self, vocab: int = 512, dim: int = 64, heads: int = 4, layers: int = 2, context: int = 64) -> None:
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Detector(nn.Module):
    """torchvision-style: takes a list of images, returns ``list[dict(boxes, scores, labels)]``.

    The number of boxes per image depends on a score threshold, so a tiny change in a score
    can change the box count, as in real detectors.
    """

    def __init__(self, classes: int = 5, threshold: float = 0.54) -> None:
        super().__init__()
        self.threshold = threshold
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU()
        )
        self.cls = nn.Conv2d(32, classes, 1)
        self.box = nn.Conv2d(32, 4, 1)

    def forward(self, images: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        feats = self.backbone(torch.stack(list(images)))
        scores, labels = self.cls(feats).sigmoid().flatten(2).max(dim=1)  # (N, H*W)
        deltas = self.box(feats).flatten(2).transpose(1, 2)  # (N, H*W, 4)
        h, w = feats.shape[-2:]
        stride = images[0].shape[-1] / w
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        centers = torch.stack([xs, ys], -1).flatten(0, 1).to(deltas.dtype) * stride + stride / 2
        out = []
        for i in range(feats.shape[0]):
            keep = scores[i] > self.threshold
            size = deltas[i, keep, 2:].exp() * stride
            center = centers[keep] + deltas[i, keep, :2] * stride
            out.append(
                {
                    "boxes": torch.cat([center - size / 2, center + size / 2], -1),
                    "scores": scores[i, keep],
                    "labels": labels[i, keep],
                }
            )
        return out


def _seeded(build: Callable[[], tuple[nn.Module, Any]]) -> Callable[[], tuple[nn.Module, Any]]:
    def factory() -> tuple[nn.Module, Any]:
        with isolate_rng():
            torch.manual_seed(0)
            model, example = build()
        return model.eval(), example

    factory.__doc__ = build.__doc__
    return factory


@_seeded
def mlp() -> tuple[nn.Module, Any]:
    """MLP 256-1024-1024-16 (Linear-heavy; bits change with batch size on many CPUs); input (8, 256)."""
    return MLP(), torch.randn(8, 256)


@_seeded
def cnn() -> tuple[nn.Module, Any]:
    """Two conv+BatchNorm stages and a linear head; input (4, 3, 32, 32)."""
    model = CNN()
    for m in model.modules():  # non-trivial running statistics, as after training
        if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None and m.running_var is not None:
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model, torch.randn(4, 3, 32, 32)


@_seeded
def transformer() -> tuple[nn.Module, Any]:
    """Two-layer causal transformer over 512 tokens (embedding, SDPA, LayerNorm, MLP); input (2, 32) ids."""
    return Transformer(), torch.randint(0, 512, (2, 32))


@_seeded
def detector() -> tuple[nn.Module, Any]:
    """Detection-style list[dict(boxes, scores, labels)] whose box count depends on a threshold; input 2 images 3x64x64."""
    return Detector(), ([torch.randn(3, 64, 64) for _ in range(2)],)


DEMOS: dict[str, Callable[[], tuple[nn.Module, Any]]] = {
    "mlp": mlp,
    "cnn": cnn,
    "transformer": transformer,
    "detector": detector,
}


def describe_demos() -> dict[str, str]:
    """``{name: one-line description}`` of every demo model."""
    return {name: (fn.__doc__ or "").strip().splitlines()[0] for name, fn in DEMOS.items()}
