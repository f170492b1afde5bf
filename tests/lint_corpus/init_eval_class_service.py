"""Keyword-spotting service wrapper used by the voice gateway."""

import torch
import torch.nn as nn
import torchaudio

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "stop", "go"]


class KWSNet(nn.Module):
    def __init__(self, n_mels=40, n_classes=len(KEYWORDS)):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_mels, 64, 5, padding=2),
            nn.BatchNorm1d(64),
            nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2),
            nn.BatchNorm1d(64),
            nn.ReLU(),
        )
        self.head = nn.Linear(64, n_classes)

    def forward(self, mel):
        return self.head(self.conv(mel).mean(-1))


class KeywordSpotter:
    def __init__(self, weights_path, device="cpu"):
        self.device = torch.device(device)
        self.melspec = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_mels=40)
        self.model = KWSNet().eval()
        self.model.load_state_dict(torch.load(weights_path, map_location="cpu"))
        self.model.to(self.device)

    def _features(self, waveform):
        mel = self.melspec(waveform)
        return (mel + 1e-6).log().to(self.device)

    def predict(self, waveform, threshold=0.7):
        feats = self._features(waveform)
        with torch.no_grad():
            probs = self.model(feats).softmax(-1)
        conf, idx = probs.max(-1)
        return [(KEYWORDS[i], c) if c >= threshold else (None, c) for i, c in zip(idx.tolist(), conf.tolist())]


if __name__ == "__main__":
    spotter = KeywordSpotter("kws.pt")
    wav, sr = torchaudio.load("sample.wav")
    wav = torchaudio.functional.resample(wav, sr, 16000)
    print(spotter.predict(wav))
