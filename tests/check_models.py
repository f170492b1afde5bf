"""Small models with one known source of divergence each, loaded by spec (also in child processes)."""

import os
import random
import time

import numpy as np
import torch
from torch import nn

WIDTH = 16


class Clean(nn.Module):
    """Row-wise ops only: batch-, thread-, process- and repeat-invariant on this CPU (measured)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.act = nn.GELU()

    def forward(self, x):
        return torch.softmax(self.act(self.norm(x)) * 3.0, dim=-1)


class Noisy(nn.Module):
    """Draws from one RNG in its forward even in eval mode."""

    def __init__(self, source):
        super().__init__()
        self.source = source

    def forward(self, x):
        if self.source == "torch":
            return x + 1e-3 * torch.randn_like(x)
        if self.source == "numpy":
            return x + float(np.random.rand())
        return x + random.random()


class WithNoise(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.body = Clean()
        self.noise = Noisy(source)

    def forward(self, x):
        return self.noise(self.body(x))


class HashOrderSum(nn.Module):
    """A running sum over a set of strings: the order, so the bits, follow Python's hash seed."""

    def __init__(self):
        super().__init__()
        self.names = [f"feature_{i}" for i in range(12)]
        g = torch.Generator().manual_seed(0)
        self.values = {n: torch.randn(WIDTH, generator=g) * 10 ** float(i % 5) for i, n in enumerate(self.names)}

    def forward(self, x):
        total = torch.zeros_like(x)
        partial = []
        for name in set(self.names):
            total = total + self.values[name]
            partial.append(total)
        return x + torch.stack(partial).sum(0)


class BatchVariant(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 64)

    def forward(self, x):
        return self.fc(self.norm(x))


class BNTrain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class CrashOneThread(nn.Module):
    def forward(self, x):
        if torch.get_num_threads() == 1:
            raise RuntimeError("no single-thread kernel")
        return x * 2


class SlowInChildren(nn.Module):
    def forward(self, x):
        if os.environ.get("PYTHONHASHSEED") not in (None, "0"):
            time.sleep(30)
        return x + 1


class ShapeChanges(nn.Module):
    def forward(self, x):
        return x[: int(torch.randint(1, x.shape[0] + 1, ()))]


class Labels(nn.Module):
    def forward(self, x):
        return {"logits": x * 1.0, "label": random.choice(["cat", "dog", "bird", "fish", "ant", "bee"])}


def _x(n=8):
    return torch.randn(n, WIDTH, generator=torch.Generator().manual_seed(1))


def clean():
    torch.manual_seed(0)
    return Clean().eval(), _x()


def dropout_on():
    torch.manual_seed(0)
    model = nn.Sequential(Clean(), nn.Dropout(0.5))
    return model.train(), _x()


def torch_noise():
    return WithNoise("torch").eval(), _x()


def numpy_noise():
    return WithNoise("numpy").eval(), _x()


def python_noise():
    return WithNoise("random").eval(), _x()


def hash_order():
    return HashOrderSum().eval(), _x()


def batch_variant():
    torch.manual_seed(0)
    return BatchVariant().eval(), _x()


def bn_train():
    torch.manual_seed(0)
    return BNTrain().train(), torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(2))


def crash_one_thread():
    return CrashOneThread(), _x()


def slow_in_children():
    return SlowInChildren(), _x()


def shape_changes():
    return ShapeChanges(), _x()


def labels():
    return Labels(), _x()


def broken_forward():
    return nn.Linear(3, 2), _x()


class Wide(nn.Module):
    """Large activations per sample: a kept output with grad retains megabytes."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(WIDTH, 2048), nn.Linear(2048, 2048)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))).sum(-1)


def wide():
    torch.manual_seed(0)
    return Wide().eval(), torch.randn(64, WIDTH, generator=torch.Generator().manual_seed(1))


def wide_no_grad():
    model, x = wide()
    return model.requires_grad_(False), x


class Contrastive(nn.Module):
    """CLIP's shape: images and texts embedded, each image scored against every text of the batch
    (``logits_per_image`` is ``[B, B]``): the rows of a batch are coupled by design."""

    def __init__(self):
        super().__init__()
        self.image, self.text = nn.Linear(16, 8), nn.Linear(12, 8)

    def forward(self, images, texts):
        a = torch.nn.functional.normalize(self.image(images), dim=-1)
        b = torch.nn.functional.normalize(self.text(texts), dim=-1)
        logits = a @ b.T
        return {"logits_per_image": logits, "logits_per_text": logits.T, "image_embeds": a}


def contrastive():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return Contrastive().eval(), (torch.randn(4, 16, generator=g), torch.randn(4, 12, generator=g))


class SelfSimilarity(nn.Module):
    """One input, every sample scored against every other of its batch (``[B, B]``)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 8)

    def forward(self, x):
        e = self.embed(x)
        return e @ e.T


def self_similarity():
    torch.manual_seed(0)
    return SelfSimilarity().eval(), torch.randn(4, 16, generator=torch.Generator().manual_seed(1))


class FlakyDetector(nn.Module):
    """A detector's output (per image: 300 boxes, scores, labels) where every second call moves
    image 1's boxes by 1e-4 and flips 2 of its labels: a constructed flip."""

    FLIPPED = (7, 42)

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, images):
        self.calls += 1
        out = []
        for i in range(images.shape[0]):
            g = torch.Generator().manual_seed(i)
            boxes, scores = torch.rand(300, 4, generator=g) * 100, torch.rand(300, generator=g)
            labels = torch.randint(0, 90, (300,), generator=g)
            if i == 1 and self.calls % 2 == 0:
                boxes = boxes + 1e-4
                labels[list(self.FLIPPED)] = (labels[list(self.FLIPPED)] + 1) % 90
            out.append({"boxes": boxes, "scores": scores, "labels": labels})
        return out


def flaky_detector():
    return FlakyDetector(), torch.zeros(2, 3, 8, 8)


class LongError(nn.Module):
    """A forward that raises a 1000-character message, as exporters and compilers do."""

    def forward(self, x):
        raise ValueError("the library explains at length " + "and at length " * 70 + "THE END")


def long_error():
    return LongError(), _x()


class GenerateRaises(nn.Module):
    """A model whose generate() raises inside, as a config with an EOS id outside its vocabulary does."""

    def forward(self, input_ids, attention_mask=None):
        return input_ids.float()

    def generate(self, **kwargs):
        raise IndexError("index 50256 is out of bounds for dimension 0 with size 512")


def generate_raises():
    ids = torch.arange(1, 9).reshape(2, 4)
    return GenerateRaises(), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


class RescalesOnFirstUse(nn.Module):
    """Halves two weights in place on its first forward, in eval mode too (as transformers' RWKV
    rescales ``attention.output.weight`` and ``feed_forward.value.weight``); later forwards leave
    them alone."""

    def __init__(self):
        super().__init__()
        self.attention = nn.Linear(WIDTH, WIDTH)
        self.value = nn.Linear(WIDTH, WIDTH)
        self.rescaled = False

    def forward(self, x):
        if not self.rescaled:
            with torch.no_grad():
                self.attention.weight /= 2
                self.value.weight /= 2
            self.rescaled = True
        return self.value(torch.relu(self.attention(x)))


def rescales_on_first_use():
    torch.manual_seed(0)
    return RescalesOnFirstUse().eval(), _x()


class PackedGRU(nn.Module):
    """A GRU over padded sequences packed by their per-row lengths: the packed batch's layout (and
    the GEMMs over it) depends on every row's length, not only the sample's."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(WIDTH, WIDTH, batch_first=True)
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)
        return self.head(hidden[-1])


def packed_gru():
    torch.manual_seed(0)
    x = torch.randn(4, 12, WIDTH, generator=torch.Generator().manual_seed(2))
    return PackedGRU().eval(), {"x": x, "lengths": torch.tensor([12, 9, 5, 3])}


def weights_by_threads():
    """A factory whose initialisation depends on the thread count (as nn.init.orthogonal_ does
    through threaded LAPACK): other weights at 1 and 2 threads, the same forward."""
    torch.manual_seed(0)
    model = nn.Linear(WIDTH, 4).eval()
    if torch.get_num_threads() > 1:
        with torch.no_grad():
            model.weight.add_(1e-3)
    return model, _x()


class PositionalNoise(nn.Module):
    """Adds noise seeded by each row's position in the batch (a per-position generator)."""

    def forward(self, x):
        noise = torch.stack(
            [torch.randn(x.shape[1:], generator=torch.Generator().manual_seed(i)) for i in range(x.shape[0])]
        )
        return x + 0.2 * noise


def positional_noise():
    return PositionalNoise().eval(), _x()


def quantized_lstm():
    """A dynamically quantized LSTM: one activation scale per batch, so neighbours move a row."""
    torch.manual_seed(0)
    lstm = nn.LSTM(WIDTH, WIDTH, batch_first=True)
    model = torch.ao.quantization.quantize_dynamic(nn.Sequential(lstm), {nn.LSTM}, dtype=torch.qint8)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            return self.inner(x)[0]

    return Wrap().eval(), torch.randn(4, 6, WIDTH, generator=torch.Generator().manual_seed(3))


class TopOneRouter(nn.Module):
    """A mixture of experts: each row goes to the expert its gate scores highest, and each expert
    runs on the rows routed to it together, so its GEMM's row count follows the neighbours."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(WIDTH, 2)
        self.experts = nn.ModuleList(nn.Linear(WIDTH, 64) for _ in range(2))

    def forward(self, x):
        choice = self.gate(x).argmax(-1)
        out = x.new_zeros(x.shape[0], 64)
        for i, expert in enumerate(self.experts):
            rows = (choice == i).nonzero().flatten()
            if rows.numel():
                out[rows] = expert(x[rows])
        return out


def top_one_router():
    torch.manual_seed(0)
    return TopOneRouter().eval(), torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(4))
