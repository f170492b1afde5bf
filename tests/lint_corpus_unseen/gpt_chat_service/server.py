# shaped after karpathy/nanoGPT:sample.py (rewritten, not copied)
"""HTTP service over the char-level GPT: /generate samples text, /logprob scores a string."""
import os

import torch
import torch.nn.functional as F
from fastapi import FastAPI
from pydantic import BaseModel

from chatgpt.loader import load_checkpoint
from chatgpt.vocab import CharVocab

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
model = load_checkpoint(os.environ.get("CKPT", "out-shakespeare-char/ckpt.pt"), DEVICE)
vocab = CharVocab.from_dataset_dir(os.environ.get("DATA_DIR", "data/shakespeare_char"))

app = FastAPI()


class GenerateRequest(BaseModel):
    prompt: str = "\n"
    max_new_tokens: int = 200
    temperature: float = 0.8
    top_k: int = 200
    seed: int = 1337


class ScoreRequest(BaseModel):
    text: str


@app.post("/generate")
def generate(req: GenerateRequest):
    torch.manual_seed(req.seed)
    x = torch.tensor([vocab.encode(req.prompt)], dtype=torch.long, device=DEVICE)
    y = model.generate(x, req.max_new_tokens, temperature=req.temperature, top_k=req.top_k)
    return {"text": vocab.decode(y[0].tolist())}


@app.post("/logprob")
def logprob(req: ScoreRequest):
    ids = torch.tensor([vocab.encode(req.text)], dtype=torch.long, device=DEVICE)
    with torch.inference_mode():
        logits, _ = model(ids[:, :-1])
        lp = F.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).sum()
    return {"logprob": lp.item(), "chars": ids.shape[1]}
