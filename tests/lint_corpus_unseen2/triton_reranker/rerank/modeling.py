# shaped after bluelazer/RAG_chatbot:test/reranker.py (rewritten, not copied)
"""Cross-encoder = pretrained encoder + dropout + linear relevance head (fine-tuned in-house)."""
import os

import torch
import torch.nn as nn
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoTokenizer


class CrossEncoderHead(nn.Module):
    def __init__(self, backbone_dir, dropout=0.1):
        super().__init__()
        config = AutoConfig.from_pretrained(backbone_dir)
        self.backbone = AutoModel.from_config(config)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(config.hidden_size, 1)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        cls = out.last_hidden_state[:, 0]
        return self.head(self.dropout(cls)).squeeze(-1)


def load_reranker(model_dir, device="cpu", dtype=torch.float16):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = CrossEncoderHead(model_dir)
    model.load_state_dict(load_file(os.path.join(model_dir, "reranker.safetensors")))
    model.eval()
    if device != "cpu":
        model = model.to(device=device, dtype=dtype)
    return tokenizer, model
