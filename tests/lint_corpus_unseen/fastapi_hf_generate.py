# shaped after zfir-dev/TypeScriptMate:app.py (rewritten, not copied)
"""Small completion service: /complete generates, /score returns the prompt's mean log-likelihood."""
import torch
from fastapi import FastAPI
from pydantic import BaseModel
from transformers import AutoModelForCausalLM, AutoTokenizer

MODEL_DIR = "model"

tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, torch_dtype=torch.bfloat16)
model.to("cuda" if torch.cuda.is_available() else "cpu")

app = FastAPI()


class CompletionRequest(BaseModel):
    prompt: str
    max_tokens: int = 64
    temperature: float = 0.0


class ScoreRequest(BaseModel):
    text: str


@app.post("/complete")
def complete(req: CompletionRequest):
    enc = tokenizer(req.prompt, return_tensors="pt").to(model.device)
    sampling = {"do_sample": req.temperature > 0}
    if req.temperature > 0:
        sampling["temperature"] = req.temperature
    out = model.generate(**enc, max_new_tokens=req.max_tokens, pad_token_id=tokenizer.eos_token_id, **sampling)
    text = tokenizer.decode(out[0, enc.input_ids.shape[1]:], skip_special_tokens=True)
    return {"completion": text}


@app.post("/score")
def score(req: ScoreRequest):
    enc = tokenizer(req.text, return_tensors="pt").to(model.device)
    with torch.inference_mode():
        loss = model(**enc, labels=enc.input_ids).loss
    return {"mean_logprob": -loss.item(), "tokens": int(enc.input_ids.shape[1])}
