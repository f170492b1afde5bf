# shaped after rohan-gogate/crypto-vae-anomaly:scripts/detect_anomaly.py (rewritten, not copied)
"""Score price windows with the trained VAE; windows above mean + 3 std of the error are anomalies."""
import os
import random

import numpy as np
import torch
from torch.utils.data import DataLoader

from models.vae import VAE
from utils.dataset import SequenceDataset

SEED = 7
input_dim, latent_dim, hidden_dim = 60, 10, 32
batch_size = 64
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_seed(seed):
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True


def seed_worker(worker_id):
    ws = torch.initial_seed() % 2 ** 32
    np.random.seed(ws)
    random.seed(ws)


set_seed(SEED)
model = VAE(input_dim=input_dim, latent_dim=latent_dim, hidden_dim=hidden_dim).to(device)
model.load_state_dict(torch.load("models/vae_trained.pth", map_location=device))
model.eval()

sequences = np.load("data/sequences.npy")
dataset = SequenceDataset(sequences)
dataloader = DataLoader(dataset, batch_size=batch_size, num_workers=2, worker_init_fn=seed_worker)

errors = []
with torch.no_grad():
    for x, _ in dataloader:
        x = x.to(device)
        recon, mu, logvar = model(x)
        errors.append(((x - recon) ** 2).mean(dim=1).cpu())
errors = torch.cat(errors).numpy()

threshold = errors.mean() + 3 * errors.std()
anomalies = np.where(errors > threshold)[0]
print(f"threshold {threshold:.4f}: {len(anomalies)} anomalous windows")
np.save("data/anomaly_indices.npy", anomalies)
