# shaped after pholur/situation-modeling:imports.py (rewritten, not copied)
"""Deterministic evaluation of the situation classifier: same checkpoint, same bits on every run."""
import os

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import random  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from situation.data import SituationDataset  # noqa: E402

SEED = 0
torch.manual_seed(SEED)
random.seed(SEED)
np.random.seed(SEED)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

g = torch.Generator()
g.manual_seed(SEED)

device = "cuda" if torch.cuda.is_available() else "cpu"
tokenizer = AutoTokenizer.from_pretrained("checkpoints/situation-roberta")
model = AutoModelForSequenceClassification.from_pretrained("checkpoints/situation-roberta").to(device)

test_set = SituationDataset("data/test.jsonl", tokenizer, max_len=128)
loader = DataLoader(test_set, batch_size=64, shuffle=False, num_workers=4, generator=g)

correct = total = 0
rows = []
with torch.no_grad():
    for batch in loader:
        labels = batch.pop("labels").to(device)
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(**batch).logits
        pred = logits.argmax(-1)
        correct += (pred == labels).sum().item()
        total += labels.numel()
        rows.append(logits.float().cpu())
print(f"accuracy {correct / total:.4f} on {total}")
torch.save(torch.cat(rows), "outputs/test_logits.pt")
