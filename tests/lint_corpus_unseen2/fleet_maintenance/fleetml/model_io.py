# shaped after degeaja/AgenticAI_FleetMaintenance:src/app/ml/model_io.py (rewritten, not copied)
"""Streamline model loading and scaling."""
import os

import joblib
import torch

from fleetml.config import DEVICE, DROPOUT, HIDDEN_SIZES, MODEL_PATH, SCALER_PATH
from fleetml.lstm_arch import LSTMModel


def load_model(features_len: int):
    model = LSTMModel(input_size=features_len, hidden_sizes=HIDDEN_SIZES, dropout=DROPOUT).to(DEVICE)
    model.load_state_dict(torch.load(MODEL_PATH, map_location=DEVICE))
    return model


def load_scaler():
    return joblib.load(SCALER_PATH)


def artifact_info():
    return {
        "model": MODEL_PATH,
        "model_bytes": os.path.getsize(MODEL_PATH) if os.path.exists(MODEL_PATH) else None,
        "scaler": SCALER_PATH,
        "device": str(DEVICE),
    }
