# shaped after sensoryDev/fastapi-llm-api:main.py (rewritten, not copied)
"""Embedding service with an in-process cache of already embedded texts."""
from fastapi import FastAPI
from pydantic import BaseModel
from transformers import AutoModel, AutoTokenizer

NAME = "BAAI/bge-small-en-v1.5"

tokenizer = AutoTokenizer.from_pretrained(NAME)
model = AutoModel.from_pretrained(NAME)
model.eval()

app = FastAPI()
CACHE = {}


class EmbedRequest(BaseModel):
    texts: list[str]


@app.post("/embed")
def embed(req: EmbedRequest):
    for text in req.texts:
        if text in CACHE:
            continue
        enc = tokenizer(text, truncation=True, max_length=512, return_tensors="pt")
        hidden = model(**enc).last_hidden_state
        CACHE[text] = hidden[0, 0]
    vecs = [CACHE[t] for t in req.texts]
    return {"embeddings": [(v / v.norm()).tolist() for v in vecs]}


@app.get("/cache/size")
def cache_size():
    return {"entries": len(CACHE)}


@app.delete("/cache")
def clear_cache():
    CACHE.clear()
    return {"entries": 0}
