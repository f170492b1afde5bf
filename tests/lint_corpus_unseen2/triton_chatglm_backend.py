# shaped after shaowenchen/demo:triton-python/ChatGLM2-6B/chatglm2-6b/1/model.py (rewritten, not copied)
"""Triton python backend serving ChatGLM2-6B chat with per-session history."""
import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from transformers import AutoModel, AutoTokenizer


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        weights = os.path.join(args["model_repository"], args["model_version"], "chatglm2-6b")
        self.tokenizer = AutoTokenizer.from_pretrained(weights, trust_remote_code=True)
        model = AutoModel.from_pretrained(weights, trust_remote_code=True).half()
        if torch.cuda.is_available():
            model = model.cuda()
        self.model = model.eval()
        self.sessions = {}
        print("Initialized...")

    def execute(self, requests):
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "prompt").as_numpy()[0].decode("utf-8")
            session_id = pb_utils.get_input_tensor_by_name(request, "session_id").as_numpy()[0].decode("utf-8")
            history = self.sessions.get(session_id, [])
            response, history = self.model.chat(self.tokenizer, prompt, history=history, max_length=2048)
            self.sessions[session_id] = history[-8:]
            out = pb_utils.Tensor("response", np.array([response.encode("utf-8")], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self):
        self.sessions.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print("Cleaning up...")
