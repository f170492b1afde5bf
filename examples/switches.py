"""A short tour of samebits' foundation: digests, batch variance on this CPU, and the switches.

Run: python examples/switches.py
"""

import torch

import samebits
from samebits.models import load_model

loaded = load_model("demo:mlp")
model, x = loaded.model, loaded.example_inputs.args[0]

with samebits.deterministic(0) as record, torch.inference_mode():
    alone = model(x[:1])
    in_batch = model(x)[:1]
    print(f"row 0 alone    : {samebits.digest(alone)[:16]}")
    print(f"row 0 in batch : {samebits.digest(in_batch)[:16]}")
    print(samebits.compare(alone, in_batch))
    ineffective = [c.name for c in record.ineffective()]
    print(
        f"\n{len(record.changes)} switches recorded; without effect on this machine: {', '.join(ineffective) or 'none'}"
    )

print("\nAll switches were restored:", not torch.are_deterministic_algorithms_enabled())
