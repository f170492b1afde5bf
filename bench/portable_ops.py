"""Which op classes a portable level pins: each op of the demos and real models on fixed weights
and inputs, in a fresh process per setting (this CPU natively, simulated x86-64-v3 and -v2 CPUs,
each level on each CPU that can run it) at 1 and 2 threads; a digest per op. The table in
docs/portable.md ("Measured: which ops a level pins") comes from here.

Run: python bench/portable_ops.py
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def modules():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return {
        "linear": nn.Linear(512, 1024),
        "conv": nn.Conv2d(16, 32, 3),
        "layernorm": nn.LayerNorm(512),
        "attention": nn.MultiheadAttention(512, 8, batch_first=True),
        "embedding": nn.Embedding(1000, 512),
        "batchnorm": nn.BatchNorm2d(16),
        "lstm": nn.LSTM(64, 64, batch_first=True),
        "groupnorm": nn.GroupNorm(4, 16),
    }


def child(state: str) -> None:
    """Digests of every op on the weights and inputs saved in ``state``."""
    import torch

    digest = lambda t: hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:10]  # noqa: E731
    saved = torch.load(state)
    mods = modules()
    for name, m in mods.items():
        m.load_state_dict(saved["mods"][name])
        m.eval()
    x, img, ids = saved["x"], saved["img"], saved["ids"]
    q = x.view(8, 64, 8, 64).transpose(1, 2)
    with torch.inference_mode():
        out = {
            "linear": mods["linear"](x),
            "matmul": x @ x.transpose(1, 2),
            "conv": mods["conv"](img),
            "attention": mods["attention"](x, x, x)[0],
            "sdpa": torch.nn.functional.scaled_dot_product_attention(q, q, q),
            "softmax": x.softmax(-1),
            "gelu": torch.nn.functional.gelu(x),
            "exp": x.exp(),
            "layernorm": mods["layernorm"](x),
            "groupnorm": mods["groupnorm"](img),
            "lstm": mods["lstm"](x[:, :, :64])[0],
            "embedding": mods["embedding"](ids),
            "batchnorm": mods["batchnorm"](img),
            "sum": x.sum(-1),
            "randn": torch.randn(1000, generator=torch.Generator().manual_seed(0)),
        }
    print(json.dumps({k: digest(v) for k, v in out.items()}))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    import torch

    from samebits.determinism.portable import CODE_PATH_VARS, machines
    from samebits.determinism.portable import read_cpuinfo

    flags = read_cpuinfo()[1]
    with tempfile.TemporaryDirectory() as tmp:
        state = str(Path(tmp) / "state.pt")
        torch.manual_seed(1)
        torch.save(
            {
                "mods": {k: m.state_dict() for k, m in modules().items()},
                "x": torch.randn(8, 64, 512),
                "img": torch.randn(4, 16, 32, 32),
                "ids": torch.randint(0, 1000, (8, 64)),
            },
            state,
        )
        base = {k: v for k, v in os.environ.items() if k not in CODE_PATH_VARS}
        settings = [*machines(None, flags), *machines("x86-64-v3", flags), *machines("x86-64-v2", flags)]
        rows: dict[str, dict[str, str]] = {}
        for label, env in settings:
            for threads in ("1", "2"):
                pins = {k: v for k, v in env.items() if v}
                run = {**base, **pins, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", state], env=run, capture_output=True, text=True, timeout=300
                )
                if done.returncode != 0:
                    raise SystemExit(f"{label}: {done.stderr.strip()[-300:]}")
                rows[f"{label}, {threads} thread(s)"] = json.loads(done.stdout)
    ops = list(next(iter(rows.values())))
    print("| setting | " + " | ".join(ops) + " |")
    print("|---|" + "---|" * len(ops))
    for label, digests in rows.items():
        print(f"| {label} | " + " | ".join(digests[op][:6] for op in ops) + " |")


if __name__ == "__main__":
    main()
