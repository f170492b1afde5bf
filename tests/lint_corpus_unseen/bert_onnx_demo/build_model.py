# shaped after Tongjilibo/bert4torch:examples/others/task_onnx.py (rewritten, not copied)
"""The sentiment classifier shared by the training, serving and export scripts."""
import torch
import torch.nn as nn
from bert4torch.models import BaseModel, build_transformer_model
from bert4torch.tokenizers import Tokenizer

CONFIG = "pretrained/bert-base-chinese/bert4torch_config.json"
CKPT = "pretrained/bert-base-chinese/pytorch_model.bin"
VOCAB = "pretrained/bert-base-chinese/vocab.txt"
FINETUNED = "best_model.pt"

tokenizer = Tokenizer(VOCAB, do_lower_case=True)


class SentimentNet(BaseModel):
    def __init__(self):
        super().__init__()
        self.bert = build_transformer_model(config_path=CONFIG, checkpoint_path=CKPT, with_pool=True)
        self.dropout = nn.Dropout(0.1)
        self.dense = nn.Linear(768, 2)

    def forward(self, token_ids):
        _, pooled = self.bert([token_ids])
        return self.dense(self.dropout(pooled))


model = SentimentNet()
model.load_state_dict(torch.load(FINETUNED, map_location="cpu"))
model.eval()
