"""``Predictor.generate`` against plain ``model.generate`` on the same batches, side by side in
one run (issue #17): tokens/s, and how many prompts' tokens (and score bits) differ from that
prompt generated alone the same way.

Run: python bench/generate_speed.py [--prompts 64] [--new 16] [--rounds 3]
Models: the tiny GPT-2 (with twin token embeddings, built to part) and Llama of the real-model
suite (tests/real_models.py), random weights. Plain: left-padded to the batch's longest prompt,
the model's default attention (sdpa). Target: Predictor.generate >= 0.8x plain's tokens/s at
batch 8 and 32, with 0 prompts differing from alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import real_models  # noqa: E402
import samebits  # noqa: E402


def plain(model, batch, n):
    width = max(len(p) for p in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(batch):
        ids[i, width - len(p) :], mask[i, width - len(p) :] = p, 1
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0
        )
    return [out[i, width:] for i in range(len(batch))]


def batches(count, size):
    return [list(range(s, min(s + size, count))) for s in range(0, count, size)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(3)
    lengths = torch.randint(3, 30, (args.prompts,), generator=gen).tolist()
    prompts = [torch.randint(3, 512, (n,), generator=gen) for n in lengths]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.prompts} prompts of 3-29 tokens, "
        f"{args.new} new tokens each (plain: forced, no early stop); medians of {args.rounds} rounds"
    )
    head = f"{'model':>6} {'batch':>5} {'config':>22} {'tokens/s':>9} {'ratio':>6} {'differ':>7}"
    lines = [head]
    for name in ("gpt2_twins", "llama"):
        model, example = getattr(real_models, name)()
        predictor = samebits.Predictor(model, example_inputs=example, cache_dir=tempfile.mkdtemp(), deterministic=False)
        alone_plain = [plain(model, [p], args.new)[0] for p in prompts]
        alone_ours = {t: [predictor.generate([p], args.new, tile=t)[0].tokens for p in prompts] for t in (8, 32)}
        for size in (8, 32):
            groups = batches(len(prompts), size)
            configs = {
                "plain generate": lambda: [t for g in groups for t in plain(model, [prompts[i] for i in g], args.new)],
                **{
                    f"Predictor.generate t={t}": (
                        lambda t=t: [
                            x.tokens
                            for g in groups
                            for x in predictor.generate([prompts[i] for i in g], args.new, tile=t)
                        ]
                    )
                    for t in (8, 32)
                },
            }
            seconds, outs = {}, {}
            for label, fn in configs.items():
                outs[label] = fn()  # warm-up (and the first-call check)
                times = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - start)
                seconds[label] = statistics.median(times)
            base = seconds["plain generate"]
            for label, s in seconds.items():
                reference = alone_plain if label == "plain generate" else alone_ours[int(label.split("=")[1])]
                differ = sum(not torch.equal(a, b) for a, b in zip(outs[label], reference))
                produced = sum(len(t) for t in outs[label])
                lines.append(f"{name[:6]:>6} {size:>5} {label:>22} {produced / s:>9,.0f} {base / s:>6.2f} {differ:>7}")
                print(lines[-1])
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
