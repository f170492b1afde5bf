# shaped after degeaja/AgenticAI_FleetMaintenance:src/app/ml/config.py (rewritten, not copied)
"""Paths, features and hyper-parameters shared by training, the batch job and the API."""
import os

import torch

ARTIFACT_DIR = os.environ.get("FLEET_ARTIFACTS", "artifacts")
MODEL_PATH = os.path.join(ARTIFACT_DIR, "lstm_fail7d.pt")
SCALER_PATH = os.path.join(ARTIFACT_DIR, "scaler.save")

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

FEATURES = [
    "odometer_km",
    "engine_hours",
    "avg_coolant_temp_c",
    "oil_pressure_kpa",
    "rpm",
    "speed_kmh",
    "n_dtc",
]
WINDOW = 30  # telemetry rows per vehicle fed to the LSTM
HIDDEN_SIZES = [200, 100, 50]
DROPOUT = 0.3

BUCKETS = ((0.6, "<7d"), (0.3, "<30d"))
DEFAULT_BUCKET = ">30d"
