# shaped after Thodorissio/triton-crossencoder:model-repository/bge-reranker-v2-m3/1/model.py (rewritten, not copied)
"""Triton python backend: INPUT_PAIRS (N x 2 bytes) -> SCORES (N float32)."""
import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

from rerank.batching import score_pairs
from rerank.modeling import load_reranker


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        model_dir = os.path.join(args["model_repository"], args["model_version"])
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer, self.model = load_reranker(model_dir, device=self.device)

        # warm-up: one padded batch so the first real request does not pay for allocator growth
        dummy = self.tokenizer([["warm up", "query"]] * 8, padding="max_length", max_length=512,
                               truncation=True, return_tensors="pt").to(self.device)
        self.model(**dummy)

        out_cfg = pb_utils.get_output_config_by_name(self.model_config, "SCORES")
        self.output_dtype = pb_utils.triton_string_to_numpy(out_cfg["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "INPUT_PAIRS").as_numpy()
            pairs = [(q.decode("utf-8"), p.decode("utf-8")) for q, p in raw]
            scores = score_pairs(self.model, self.tokenizer, pairs)
            out = pb_utils.Tensor("SCORES", np.asarray(scores, dtype=self.output_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self):
        print("Cleaning up cross-encoder model...")
