# shaped after ITMO-NSS-team/MADD-CoScientist:infrastructure/chroma/reranker_service/app.py (rewritten, not copied)
"""Rerank service: a CrossEncoder behind /rerank and a raw HF classifier behind /score."""
import logging
import os
from contextlib import asynccontextmanager

import torch
from fastapi import FastAPI
from pydantic import BaseModel
from sentence_transformers import CrossEncoder
from transformers import AutoModelForSequenceClassification, AutoTokenizer

RERANK_ID = os.getenv("RERANK_MODEL", "Alibaba-NLP/gte-multilingual-reranker-base")
SCORE_ID = os.getenv("SCORE_MODEL", "BAAI/bge-reranker-base")

reranker: CrossEncoder = None
tokenizer = None
scorer = None


@asynccontextmanager
async def lifespan(app: FastAPI):
    global reranker, tokenizer, scorer
    torch.set_float32_matmul_precision("high")
    reranker = CrossEncoder(RERANK_ID, max_length=2048, trust_remote_code=True)
    reranker.predict([["warmup", "query"]])  # warm the model up
    tokenizer = AutoTokenizer.from_pretrained(SCORE_ID)
    scorer = AutoModelForSequenceClassification.from_pretrained(SCORE_ID, torch_dtype=torch.float16)
    scorer.to("cuda" if torch.cuda.is_available() else "cpu")
    logging.info("reranker models loaded")
    yield


app = FastAPI(lifespan=lifespan)


class Pairs(BaseModel):
    query: str
    passages: list[str]


@app.post("/rerank")
async def rerank(req: Pairs):
    pairs = [(req.query, p) for p in req.passages]
    scores = reranker.predict(pairs, batch_size=32).tolist()
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return {"order": order, "scores": scores}


@app.post("/score")
@torch.inference_mode()
def score(req: Pairs):
    enc = tokenizer([[req.query, p] for p in req.passages], padding=True, truncation=True,
                    max_length=512, return_tensors="pt").to(scorer.device)
    logits = scorer(**enc, return_dict=True).logits.view(-1).float()
    return {"scores": logits.tolist()}


if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="0.0.0.0", port=5001)
