# shaped after iorymaeda/DateMatching:Model/handler.py (rewritten, not copied)
"""TorchServe handler: scores (profile, profile) pairs with the siamese matcher."""
import json
import os
import pickle
from abc import ABC

import torch
from ts.torch_handler.base_handler import BaseHandler

from matcher.features import encode_profile
from matcher.model import SiameseMatcher


class MatchHandler(BaseHandler, ABC):
    def __init__(self):
        super().__init__()
        self.initialized = False

    def initialize(self, ctx):
        props = ctx.system_properties
        model_dir = props.get("model_dir")
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        with open(os.path.join(model_dir, "setup_config.json")) as f:
            self.cfg = json.load(f)
        with open(os.path.join(model_dir, "vocab.pkl"), "rb") as f:
            self.vocab = pickle.load(f)
        self.model = SiameseMatcher(vocab_size=len(self.vocab), **self.cfg["model"])
        state = torch.load(os.path.join(model_dir, "matcher.pt"), map_location="cpu", weights_only=True)
        self.model.load_state_dict(state)
        self.model.to(self.device).eval()
        self.initialized = True

    def preprocess(self, requests):
        left, right = [], []
        for req in requests:
            body = req.get("body") or req.get("data")
            if isinstance(body, (bytes, bytearray)):
                body = json.loads(body)
            left.append(encode_profile(body["a"], self.vocab))
            right.append(encode_profile(body["b"], self.vocab))
        return torch.stack(left).to(self.device), torch.stack(right).to(self.device)

    def inference(self, input_batch):
        a, b = input_batch
        with torch.no_grad():
            logits = self.model(a, b)
        return torch.sigmoid(logits).squeeze(-1)

    def postprocess(self, inference_output):
        return [{"match": float(p)} for p in inference_output.cpu().tolist()]
