"""Servers tests/test_probe.py probes, each started as ``python tests/probe_servers.py KIND
--port P [--model NAME]`` on 127.0.0.1 (in its own process group, killed by the test's fixture),
and the models they serve (also MODEL specs for ``samebits probe --model`` and ``samebits serve``).

KIND: ``litserve`` (the Open Inference Protocol's JSON over LitServe's batching, as
bench/serve_load.py serves it), ``fastapi`` (one forward per request on the event loop),
``litserve-openai`` (LitServe's OpenAI spec over a tiny GPT-2 from a config, greedy, prompts
batched left-padded) and ``fastapi-openai`` (``/v1/completions`` with logprobs, one prompt per
forward). ``--threads N`` (default 1; 0: torch's own) for the model, ``--positions padded``
(default) or ``exact`` for litserve-openai's position ids. LitServe 0.2.19's OpenAI spec has no logprobs field in its answers, so that server
writes each generated token as ``id(logprob)`` into the content: its text carries the logprobs."""

# (no `from __future__ import annotations`: FastAPI reads the handlers' annotations)
import argparse
import contextlib
from pathlib import Path
from typing import Any

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
MAX_BATCH = 16
BATCH_TIMEOUT_S = 0.01


class BatchSized(nn.Module):
    """A Linear whose every output row carries the size of the batch it ran in (x 1e-3): a server
    that batches answers with other bits under load, on any CPU, by construction."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(x) + x.shape[0] * 1e-3


def batch_sized():
    torch.manual_seed(0)
    return BatchSized(), torch.randn(8, 32)


def mlp():
    """tests/serve_models.py's MLP (32 -> 64 -> 10), a real model whose outcome is measured."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    return model, torch.randn(8, 32)


def load(name: str) -> nn.Module:
    model, _ = {"batch_sized": batch_sized, "mlp": mlp}[name]()
    return model.eval()


def decode_v2(body: dict) -> torch.Tensor:
    spec = body["inputs"][0]
    return torch.tensor(spec["data"], dtype=torch.float32).reshape(spec["shape"])


def encode_v2(name: str, y: torch.Tensor) -> dict:
    data = y.reshape(-1).tolist()
    return {
        "model_name": name,
        "outputs": [{"name": "output_0", "shape": list(y.shape), "datatype": "FP32", "data": data}],
    }


# -- a tiny GPT-2 and greedy generation over a batch of prompts, left-padded ----------------------
VOCAB = 64


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(config).eval()


def token_ids(prompt: str) -> list[int]:
    return [1 + sum(map(ord, word)) % (VOCAB - 1) for word in prompt.split()] or [1]


def generate(model: nn.Module, prompts: list[str], steps: int, exact_positions: bool = True):
    """Per step, for each prompt: (token id, its logprob), greedy, all prompts in one batch,
    left-padded. ``exact_positions=False`` numbers positions from the padded start, as many
    hand-written batched loops do: a prompt's answer then depends on the longest prompt it was
    batched with, by construction."""
    ids = [token_ids(p) for p in prompts]
    width = max(map(len, ids))
    input_ids = torch.tensor([[0] * (width - len(i)) + i for i in ids])
    mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
    with torch.inference_mode():
        for _ in range(steps):
            positions = (mask.cumsum(1) - 1).clamp(min=0) if exact_positions else None
            logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions).logits[:, -1]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            chosen = logprobs.argmax(-1)
            yield [(int(t), float(logprobs[r, t])) for r, t in enumerate(chosen)]
            input_ids = torch.cat([input_ids, chosen[:, None]], 1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)


# -- the servers ---------------------------------------------------------------------------------
def serve_fastapi(name: str, port: int) -> None:
    import uvicorn
    from fastapi import FastAPI, Request

    model = load(name)
    app = FastAPI()

    @app.get("/health")
    def health() -> str:
        return "ok"

    @app.post(f"/v2/models/{name}/infer")
    async def infer(request: Request) -> dict:
        with torch.inference_mode():
            return encode_v2(name, model(decode_v2(await request.json())))

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


try:
    import litserve as ls
except ImportError:  # the tests that need it skip
    ls = None

if ls is not None:  # module level: LitServe pickles the API into its worker process

    class V2API(ls.LitAPI):
        def __init__(self, name: str, threads: int | None) -> None:
            super().__init__(
                max_batch_size=MAX_BATCH, batch_timeout=BATCH_TIMEOUT_S, api_path=f"/v2/models/{name}/infer"
            )
            self.name, self.threads = name, threads

        def setup(self, device: Any) -> None:
            if self.threads:
                torch.set_num_threads(self.threads)  # (a process of its own)
            self.model = load(self.name)

        def decode_request(self, request):  # no annotation: LitServe reads it as the body's type
            return decode_v2(request)

        def batch(self, inputs: list) -> torch.Tensor:
            return torch.cat(inputs)

        def predict(self, x: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                return self.model(x)

        def unbatch(self, output: torch.Tensor) -> list:
            return list(output.split(1))

        def encode_response(self, output: torch.Tensor) -> dict:
            return encode_v2(self.name, output)

    class GPT2API(ls.LitAPI):
        def __init__(self, exact_positions: bool, threads: int | None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.exact_positions, self.threads = exact_positions, threads

        def setup(self, device: Any) -> None:
            if self.threads:
                torch.set_num_threads(self.threads)  # (LitServe's worker is a process of its own)
            self.model = gpt2()

        def decode_request(self, request):
            return str(request.messages[-1].content), min(int(request.max_tokens or 8), 16)

        def batch(self, inputs: list) -> list:
            return inputs

        def predict(self, requests: list):
            steps = max(n for _, n in requests)
            yield from generate(self.model, [p for p, _ in requests], steps, self.exact_positions)

        def unbatch(self, output: Any):
            yield from output

        def encode_response(self, steps: Any):
            for step in steps:
                yield [{"role": "assistant", "content": f"{t}({lp!r}) "} for t, lp in step]


def run_litserve(api: Any, port: int) -> None:
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=1)
    server.run(host="127.0.0.1", port=port, num_api_servers=1, generate_client_file=False, log_level="warning")


def serve_fastapi_openai(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI, Request

    model = gpt2()
    app = FastAPI()

    @app.get("/health")
    def health() -> str:
        return "ok"

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict:
        body = await request.json()
        steps = list(generate(model, [body["prompt"]], min(int(body.get("max_tokens", 8)), 16)))
        tokens = [str(s[0][0]) for s in steps]
        logprobs = [s[0][1] for s in steps]
        choice = {"text": " ".join(tokens), "logprobs": {"tokens": tokens, "token_logprobs": logprobs}}
        return {"id": "cmpl", "object": "text_completion", "choices": [{"index": 0, **choice}]}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie its parent has not reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def restart(pidfile: Path, argv: list[str]) -> None:
    """Stop the server whose process group ``pidfile`` names (SIGTERM, then SIGKILL after 30 s),
    start ``argv`` in a session of its own (it outlives this command), write its pid."""
    import os
    import signal
    import subprocess
    import time

    old = int(pidfile.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.killpg(old, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not alive(old):
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old, signal.SIGKILL)
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    pidfile.write_text(str(proc.pid))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["restart"]:  # restart PIDFILE -- ARGV...
        restart(Path(sys.argv[2]), sys.argv[sys.argv.index("--") + 1 :])
        sys.exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["litserve", "fastapi", "litserve-openai", "fastapi-openai"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--positions", choices=["exact", "padded"], default="padded", help="litserve-openai")
    parser.add_argument("--threads", type=int, default=1, help="the model's threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:  # the tests' machine is small and shared: no oversubscribed cores by default
        torch.set_num_threads(args.threads)
    if args.kind == "litserve":
        run_litserve(V2API(args.model, args.threads or None), args.port)
    elif args.kind == "fastapi":
        serve_fastapi(args.model, args.port)
    elif args.kind == "litserve-openai":
        exact, threads = args.positions == "exact", args.threads or None
        api = GPT2API(exact, threads, max_batch_size=MAX_BATCH, batch_timeout=BATCH_TIMEOUT_S, spec=ls.OpenAISpec())
        run_litserve(api, args.port)
    else:
        serve_fastapi_openai(args.port)
