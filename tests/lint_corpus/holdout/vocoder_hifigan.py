"""HiFi-GAN vocoder inference: mel spectrograms (.npy) or wavs -> generated waveforms."""
import argparse
import glob
import json
import os

import numpy as np
import torch
from scipy.io.wavfile import write

from env import AttrDict
from meldataset import MAX_WAV_VALUE, load_wav, mel_spectrogram
from models import Generator

h = None
device = None


def load_checkpoint(filepath, device):
    assert os.path.isfile(filepath)
    print(f"Loading '{filepath}'")
    checkpoint_dict = torch.load(filepath, map_location=device)
    print("Complete.")
    return checkpoint_dict


def get_mel(x):
    return mel_spectrogram(x, h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size, h.fmin, h.fmax)


def inference(a):
    generator = Generator(h).to(device)
    state_dict_g = load_checkpoint(a.checkpoint_file, device)
    generator.load_state_dict(state_dict_g["generator"])
    generator.eval()
    generator.remove_weight_norm()

    os.makedirs(a.output_dir, exist_ok=True)
    inputs = sorted(glob.glob(os.path.join(a.input_dir, "*")))
    with torch.no_grad():
        for i, path in enumerate(inputs):
            if path.endswith(".npy"):
                x = torch.FloatTensor(np.load(path)).to(device)
                if x.dim() == 2:
                    x = x.unsqueeze(0)
            else:
                wav, sr = load_wav(path)
                wav = torch.FloatTensor(wav / MAX_WAV_VALUE).to(device)
                x = get_mel(wav.unsqueeze(0))
            y_g_hat = generator(x)
            audio = y_g_hat.squeeze() * MAX_WAV_VALUE
            audio = audio.cpu().numpy().astype("int16")
            name = os.path.splitext(os.path.basename(path))[0] + "_generated.wav"
            write(os.path.join(a.output_dir, name), h.sampling_rate, audio)
            print(f"[{i + 1}/{len(inputs)}] {name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_dir", default="test_mel_files")
    parser.add_argument("--output_dir", default="generated_files")
    parser.add_argument("--checkpoint_file", required=True)
    a = parser.parse_args()

    config_file = os.path.join(os.path.split(a.checkpoint_file)[0], "config.json")
    with open(config_file) as f:
        json_config = json.loads(f.read())
    global h, device
    h = AttrDict(json_config)
    torch.manual_seed(h.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inference(a)


if __name__ == "__main__":
    main()
