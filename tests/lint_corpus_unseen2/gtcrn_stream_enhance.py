# shaped after LibertyKapungu/PROJECT-25P85:src/machine_learning/gtcrn_backup/infer.py (rewritten, not copied)
"""Offline and frame-by-frame (streaming) speech enhancement with GTCRN; checks they agree."""
import os
import time

import soundfile as sf
import torch

from gtcrn import GTCRN
from gtcrn_stream import StreamGTCRN, convert_to_stream

N_FFT, HOP = 512, 256
device = torch.device("cpu")
window = torch.hann_window(N_FFT).pow(0.5)

## load model
model = GTCRN().eval()
ckpt = torch.load(os.path.join("checkpoints", "model_trained_on_dns3.tar"), map_location=device)
model.load_state_dict(ckpt["model"])

stream_model = StreamGTCRN().eval()
convert_to_stream(stream_model, model)

## load data and convert to STFT
mix, fs = sf.read(os.path.join("test_wavs", "mix.wav"), dtype="float32")
assert fs == 16000
spec = torch.stft(torch.from_numpy(mix), N_FFT, HOP, N_FFT, window, return_complex=False)[None]

## offline: the whole utterance in one call
with torch.no_grad():
    offline = model(spec)[0]

## streaming: one STFT frame per call, the caches carry the state from frame to frame
conv_cache = torch.zeros(2, 1, 16, 16, 33)
tra_cache = torch.zeros(2, 3, 1, 1, 16)
inter_cache = torch.zeros(2, 1, 33, 16)
frames = []
t0 = time.perf_counter()
with torch.no_grad():
    for i in range(spec.shape[2]):
        out_i, conv_cache, tra_cache, inter_cache = stream_model(
            spec[:, :, i:i + 1], conv_cache, tra_cache, inter_cache
        )
        frames.append(out_i)
rtf = (time.perf_counter() - t0) / (len(mix) / fs)
streamed = torch.cat(frames, dim=2)[0]

## back to the time domain
enh = torch.istft(offline, N_FFT, HOP, N_FFT, window, return_complex=False)
enh_s = torch.istft(streamed, N_FFT, HOP, N_FFT, window, return_complex=False)
print("max |offline - stream|:", (enh - enh_s).abs().max().item(), "RTF:", round(rtf, 3))
sf.write(os.path.join("test_wavs", "enh.wav"), enh.detach().cpu().numpy(), fs)
sf.write(os.path.join("test_wavs", "enh_stream.wav"), enh_s.detach().cpu().numpy(), fs)
