# shaped after meijieru/crnn.pytorch:models/crnn.py (rewritten, not copied)
"""CRNN: a VGG-style conv stack over a 32-pixel-high line, two BiLSTMs, per-column class scores."""
import torch.nn as nn


class BidirectionalLSTM(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.rnn = nn.LSTM(n_in, n_hidden, bidirectional=True)
        self.embedding = nn.Linear(n_hidden * 2, n_out)

    def forward(self, x):
        recurrent, _ = self.rnn(x)  # [T, b, 2h]
        t, b, h = recurrent.size()
        out = self.embedding(recurrent.view(t * b, h))
        return out.view(t, b, -1)


class CRNN(nn.Module):
    def __init__(self, img_h, nc, nclass, nh, leaky_relu=False):
        super().__init__()
        assert img_h % 16 == 0, "img_h has to be a multiple of 16"
        ks = [3, 3, 3, 3, 3, 3, 2]
        ps = [1, 1, 1, 1, 1, 1, 0]
        nm = [64, 128, 256, 256, 512, 512, 512]
        cnn = nn.Sequential()

        def conv_relu(i, batch_norm=False):
            n_in = nc if i == 0 else nm[i - 1]
            cnn.add_module(f"conv{i}", nn.Conv2d(n_in, nm[i], ks[i], 1, ps[i]))
            if batch_norm:
                cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(nm[i]))
            cnn.add_module(f"relu{i}", nn.LeakyReLU(0.2, inplace=True) if leaky_relu else nn.ReLU(True))

        conv_relu(0)
        cnn.add_module("pooling0", nn.MaxPool2d(2, 2))  # 64x16x50
        conv_relu(1)
        cnn.add_module("pooling1", nn.MaxPool2d(2, 2))  # 128x8x25
        conv_relu(2, True)
        conv_relu(3)
        cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 256x4x26
        conv_relu(4, True)
        conv_relu(5)
        cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 512x2x27
        conv_relu(6, True)  # 512x1x26
        self.cnn = cnn
        self.rnn = nn.Sequential(BidirectionalLSTM(512, nh, nh), BidirectionalLSTM(nh, nh, nclass))

    def forward(self, x):
        conv = self.cnn(x)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
        return self.rnn(conv)
