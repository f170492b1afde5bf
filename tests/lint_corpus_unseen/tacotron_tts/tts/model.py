# shaped after NVIDIA/tacotron2:model.py (rewritten, not copied)
"""Tacotron 2 (trimmed): text ids -> mel spectrogram, with a stop-token driven inference loop."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Prenet(nn.Module):
    def __init__(self, n_mel, sizes=(256, 256)):
        super().__init__()
        dims = [n_mel] + list(sizes)
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for lin in self.layers:
            x = F.dropout(F.relu(lin(x)), p=0.5, training=True)
        return x


class Tacotron2(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.n_mel = hp.n_mel_channels
        self.embedding = nn.Embedding(hp.n_symbols, hp.symbols_embedding_dim)
        self.encoder = nn.LSTM(hp.symbols_embedding_dim, hp.encoder_embedding_dim // 2,
                               batch_first=True, bidirectional=True)
        self.prenet = Prenet(hp.n_mel_channels)
        self.decoder_rnn = nn.LSTMCell(256 + hp.encoder_embedding_dim, hp.decoder_rnn_dim)
        self.attn = nn.Linear(hp.decoder_rnn_dim, hp.encoder_embedding_dim)
        self.proj = nn.Linear(hp.decoder_rnn_dim + hp.encoder_embedding_dim, hp.n_mel_channels)
        self.gate = nn.Linear(hp.decoder_rnn_dim + hp.encoder_embedding_dim, 1)
        self.postnet = nn.Sequential(nn.Conv1d(hp.n_mel_channels, 512, 5, padding=2), nn.Tanh(),
                                     nn.Dropout(0.5), nn.Conv1d(512, hp.n_mel_channels, 5, padding=2))
        self.max_decoder_steps = hp.max_decoder_steps

    def _step(self, frame, memory, state):
        ctx = memory.mean(1) if state is None else state[2]
        h, c = self.decoder_rnn(torch.cat([self.prenet(frame), ctx], -1), None if state is None else state[:2])
        weights = torch.softmax((memory @ self.attn(h).unsqueeze(-1)).squeeze(-1), dim=-1)
        ctx = (weights.unsqueeze(-1) * memory).sum(1)
        out = torch.cat([h, ctx], -1)
        return self.proj(out), self.gate(out), (h, c, ctx), weights

    def inference(self, text_ids):
        memory, _ = self.encoder(self.embedding(text_ids))
        frame = memory.new_zeros(text_ids.size(0), self.n_mel)
        mels, aligns, state = [], [], None
        for _ in range(self.max_decoder_steps):
            frame, gate, state, w = self._step(frame, memory, state)
            mels.append(frame)
            aligns.append(w)
            if torch.sigmoid(gate).item() > 0.5:
                break
        mel = torch.stack(mels, dim=2)
        return mel, mel + self.postnet(mel), None, torch.stack(aligns, dim=1)
