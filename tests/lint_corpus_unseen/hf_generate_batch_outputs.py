# shaped after priscy82/Boring:app.py (rewritten, not copied)
"""Offline batch generation: read prompts from a JSONL file, write completions to another."""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def batched(items, n):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompts")
    ap.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct")
    ap.add_argument("--bs", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--out", default="completions.jsonl")
    args = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16, device_map="auto")

    with open(args.prompts) as fh:
        prompts = [json.loads(line)["prompt"] for line in fh]

    outputs = []
    for chunk in batched(prompts, args.bs):
        msgs = [[{"role": "user", "content": p}] for p in chunk]
        texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in msgs]
        enc = tok(texts, return_tensors="pt", padding=True).to(model.device)
        out = model.generate(**enc, max_new_tokens=args.max_new, do_sample=False)
        outputs.append(out[:, enc.input_ids.shape[1]:])

    with open(args.out, "w") as fh:
        i = 0
        for gen in outputs:
            for row in tok.batch_decode(gen, skip_special_tokens=True):
                fh.write(json.dumps({"prompt": prompts[i], "completion": row}) + "\n")
                i += 1


if __name__ == "__main__":
    main()
