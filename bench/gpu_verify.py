"""One prepared run that checks every GPU claim samebits makes, in at most 6 minutes on one H200.

    PYTHONPATH=src python bench/gpu_verify.py [--json PATH] [--budget SECONDS]

(``PYTHONPATH=src`` may be left out: the script puts this checkout's ``src`` first itself.)
Needs nothing beyond torch (a CUDA build), Triton and transformers; the backend rows skip where
onnxruntime-gpu or torch_tensorrt is not installed. Prints one table: claim, expected, observed,
verdict (``pass``, ``FAIL``, ``info``, or ``skipped: <why>``) and the seconds its check took.
Each check runs in a fresh interpreter under its own wall-clock cap (a hang costs its cap, not the
run, and no check's switches reach another): the fixed-order kernels first, then determinism,
fresh processes, goldens, the Predictor and memory, and the backends last, one engine each. The
budget bounds the whole run: a check gets what is left of it, up to its cap. On a machine without
CUDA every row is ``skipped: no CUDA`` and the run takes seconds (tests/test_gpu_verify.py). Its
output is the evidence docs/gpu.md cites for each GPU claim; a claim no run has shown says "not yet
run on a GPU". Exit 0 when no row failed, 1 when one did, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))  # samebits from this checkout, with or without PYTHONPATH=src

import torch  # noqa: E402

SKIP_NO_CUDA = "skipped: no CUDA"
MARK = "GPU_VERIFY "  # the line a child's result is on: warnings around it are never read as results
# where the checks run: CUDA's current device; tests/test_gpu_verify.py runs some checks on "cpu"
# (GPU_VERIFY_DEVICE=cpu) to find their slips before a GPU does, never for a verdict
DEVICE = os.environ.get("GPU_VERIFY_DEVICE", "cuda")

# each check's rows, in order: (claim, expected); a skipped or failed check still names them
CLAIMS: dict[str, list[tuple[str, str]]] = {
    "kernels-block": [
        (f"{what}, {dtype}", expected)
        for dtype in ("torch.float32", "torch.bfloat16", "torch.float16")
        for what, expected in (
            (
                "batch_invariant() on CUDA: a decoder block on the fixed-order kernels",
                "0 places differ; error <= 2x eager's against float64; linear, mean, sdpa, log_softmax ran on them",
            ),
            ("fixed-order kernels' cost against eager, batch 64", "measured"),
        )
    ],
    "kernels-edges": [
        (
            "kernels: odd widths (257 -> 33), an input at a 4-byte offset, a transposed weight",
            "rows alone = rows in the batch; error <= 2x eager's",
        ),
        (
            "kernels: attention over 4096 x 17 (batch, head) pairs, past the grid's 65,535",
            "runs (no 'invalid argument'); the last row's bits alone; error <= 2x eager's",
        ),
        ("kernels: softmax over a middle dim, then .view()", "strides (70, 7, 1); .view() works; torch's values"),
        ("kernels: cuda:1's tensors with cuda:0 current", "runs on cuda:1; a row's bits alone"),
    ],
    "transformers": [
        (
            f"kernels: transformers' {model} from a config, rows alone vs batched",
            "8/8 rows alone = in the batch; sdpa and the matmuls on the kernels; error <= 2x eager's",
        )
        for model in ("GPT-2", "BERT", "Llama")
    ],
    "determinism": [
        (
            "deterministic(device='cuda') with CUBLAS_WORKSPACE_CONFIG unset: a GEMM runs",
            "no error; the variable set exactly where this torch still checks it",
        ),
        ("ops that raise under deterministic algorithms on CUDA", "measured"),
        ("Predictor(deterministic=True) with such an op names it", "the op named, not 'no batch size is invariant'"),
        ("TF32 off under deterministic() (relative error vs float64)", "deterministic < 1e-5"),
    ],
    "fresh-processes": [
        ("odd conv stack under deterministic(), 2 fresh processes", "1 digest"),
        ("decoder block under batch_invariant(), 2 fresh processes", "1 digest"),
        ("odd conv stack, defaults, 2 fresh processes", "measured"),
        ("odd conv stack under fast() (cudnn.benchmark), 2 fresh processes", "measured"),
    ],
    "record-verify": [
        (
            "samebits record --device cuda, then verify --device cuda, in fresh processes",
            "policy exact, verdict identical (both fingerprints list the GPU)",
        )
    ],
    "predictor": [
        (
            "Predictor on CUDA: a row's bits in any batch (37 rows vs each alone, a view at an offset)",
            "identical",
        ),
        (
            "Predictor(batch_invariant=True) on CUDA: the same, on the fixed-order kernels",
            "identical; the kernels ran",
        ),
        ("check's batch axis on CUDA: plain, then under batch_invariant()", "identical under it"),
    ],
    "out-of-memory": [
        (
            "max_batch_size='auto' within a 1 GiB share runs out of memory and backs off",
            "a real OOM; the size before it chosen; reserved memory back after",
        ),
        ("the default memory budget within a 1 GiB share", "<= 256 MB (a quarter of it)"),
    ],
    "backend:tensorrt": [
        (
            "tensorrt: one engine built once, loaded with the same bits in a new process",
            "same bits; an execute_engine node; DISTRIBUTIVE_INDEPENDENCE set where TensorRT has it",
        )
    ],
    "backend:onnxruntime": [
        (
            "onnxruntime on CUDA: one model built once, loaded with the same bits in a new process",
            "same bits; CUDAExecutionProvider first in both",
        )
    ],
    "backend:onnxruntime-tensorrt": [
        (
            "onnxruntime-tensorrt: one engine built once, loaded with the same bits in a new process",
            "same bits; TensorrtExecutionProvider first in both",
        )
    ],
}


@dataclasses.dataclass
class Row:
    claim: str
    expected: str
    observed: str
    verdict: str  # "pass" | "FAIL" | "info" | "skipped: <why>"
    seconds: float = 0.0


def row(check: str, index: int, observed: str, verdict: str) -> Row:
    """Row ``index`` of ``check``: its claim and expectation from :data:`CLAIMS`."""
    claim, expected = CLAIMS[check][index]
    return Row(claim, expected, observed, verdict)


def rows_all(check: str, observed: str, verdict: str) -> list[Row]:
    """Every row of ``check`` with one observation and verdict (skipped, or failed as a whole)."""
    return [row(check, i, observed, verdict) for i in range(len(CLAIMS[check]))]


def passed(ok: bool) -> str:
    return "pass" if ok else "FAIL"


# --------------------------------------------------------------------------------------------
# fresh processes


def child_env() -> dict[str, str]:
    """This environment for a child: samebits from this checkout, CUBLAS_WORKSPACE_CONFIG unset
    (the rows show what samebits sets, not what the shell had)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return env


def run_child(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """``argv`` in its own process group, killed with all its children past ``timeout`` seconds:
    its exit code (``None`` where it ran out of time) and its stdout and stderr."""
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), start_new_session=True
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        return None, out + err
    return child.returncode, out + err


def marked(output: str) -> Any:
    """The JSON a child printed after :data:`MARK` (its last such line), or ``None``: never the
    output's last line, which a warning can be."""
    lines = [line for line in output.splitlines() if line.startswith(MARK)]
    return json.loads(lines[-1][len(MARK) :]) if lines else None


def fresh(code: str, timeout: float = 120) -> tuple[int | None, Any, str]:
    """``code`` in a fresh interpreter (``DEVICE`` and ``report(value)`` defined): its exit code,
    the JSON it reported, and the tail of its output."""
    prelude = (
        f"import json\nDEVICE = {DEVICE!r}\ndef report(value):\n    print({MARK!r} + json.dumps(value), flush=True)\n"
    )
    rc, out = run_child([sys.executable, "-c", prelude + textwrap.dedent(code)], timeout)
    return rc, marked(out), out.strip()[-300:].replace("\n", " / ")


def child_failed(rc: int | None, tail: str) -> str:
    return ("ran out of time" if rc is None else f"exit {rc}") + f": {tail[-160:]}"


# --------------------------------------------------------------------------------------------
# shared pieces


class Block(torch.nn.Module):
    """A decoder block as transformers writes one: RMS norm by mean, projections, causal SDPA,
    a log-softmax head (every op the fixed-order kernels cover)."""

    def __init__(self, width: int = 256, heads: int = 8, vocab: int = 1000) -> None:
        super().__init__()
        self.heads, self.qkv = heads, torch.nn.Linear(width, 3 * width)
        self.out, self.head = torch.nn.Linear(width, width), torch.nn.Linear(width, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        q, k, v = self.qkv(normed).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        mixed = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2)
        return self.head(x + self.out(mixed)).log_softmax(-1)


def changed_places(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int:
    """How many (batch size, row) places give a row other bits than it gets alone."""
    changed = 0
    for n in (n for n in (1, 3, 64, 65, 200) if n <= len(x)):
        out = fn(x[:n])
        changed += sum(not torch.equal(out[r], fn(x[r : r + 1])[0]) for r in {0, n // 2, n - 1})
    return changed


def forward_ms(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, rounds: int = 20) -> float:
    def sync() -> None:
        if x.is_cuda:
            torch.cuda.synchronize(x.device)  # the device the work is on, not the current one

    fn(x)
    sync()
    start = time.perf_counter()
    for _ in range(rounds):
        fn(x)
    sync()
    return (time.perf_counter() - start) / rounds * 1e3


def error_bound(ours: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, factor: float = 2.0) -> tuple[bool, str]:
    """Whether ``ours`` is within ``factor`` x eager's error against the float64 ``exact`` (plus
    a float32 ulp of its scale), and the two errors in words."""
    mine = (ours.double() - exact).abs().max().item()
    theirs = (eager.double() - exact).abs().max().item()
    slack = 1.2e-7 * max(exact.abs().max().item(), 1e-30)
    return mine <= factor * theirs + slack, f"error {mine:.1e} (eager {theirs:.1e})"


def spy_on_kernels() -> tuple[set[str], Callable[[], None]]:
    """The ops the fixed-order kernels ran from now on, and how to stop listening."""
    from samebits.runtime import fixed_order

    ran: set[str] = set()
    real = fixed_order.call

    def call(func: Any, *rest: Any) -> Any:
        out = real(func, *rest)
        if out is not NotImplemented:
            ran.add(str(func).removeprefix("aten.").split(".")[0])
        return out

    fixed_order.call = call

    def stop() -> None:
        fixed_order.call = real

    return ran, stop


def kernels_missing() -> str | None:
    from samebits.runtime import fixed_order

    return fixed_order.unavailable()


# --------------------------------------------------------------------------------------------
# the checks, each run in its own child (``gpu_verify.py --check NAME``)


def kernels_block() -> list[Row]:
    import samebits

    if reason := kernels_missing():
        return rows_all("kernels-block", "", f"skipped: {reason}")
    rows = []
    torch.manual_seed(0)
    for i, dtype in enumerate((torch.float32, torch.bfloat16, torch.float16)):
        block = Block().to(DEVICE, dtype).eval()
        x = torch.randn(200, 32, 256, device=DEVICE).to(dtype)
        with torch.inference_mode():
            exact = Block().to(DEVICE).double().eval()
            exact.load_state_dict({k: v.double() for k, v in block.state_dict().items()})
            reference = exact(x[:64].double())
            plain = changed_places(block, x)
            plain_ms, eager = forward_ms(block, x[:64]), block(x[:64])
            ran, stop = spy_on_kernels()
            try:
                with samebits.batch_invariant():  # CUDA tensors take the kernels by default
                    fixed = changed_places(block, x)
                    fixed_ms, ours = forward_ms(block, x[:64]), block(x[:64])
            finally:
                stop()
        bounded, errors = error_bound(ours, eager, reference)
        covered = {"linear", "mean", "scaled_dot_product_attention", "log_softmax"} <= ran
        observed = f"{fixed} (plain: {plain}); {errors}; ran {', '.join(sorted(ran))}"
        rows.append(row("kernels-block", 2 * i, observed, passed(fixed == 0 and bounded and covered)))
        cost = f"{plain_ms:.2f} ms eager, {fixed_ms:.2f} ms kernels ({fixed_ms / plain_ms:.2f}x)"
        rows.append(row("kernels-block", 2 * i + 1, cost, "info"))
    return rows


def kernels_edges() -> list[Row]:
    import samebits

    F = torch.nn.functional
    if reason := kernels_missing():
        return rows_all("kernels-edges", "", f"skipped: {reason}")
    rows = []
    torch.manual_seed(1)
    # odd widths, an input at an offset of one element (4-byte aligned), a weight read transposed
    x = torch.randn(150 * 257 + 1, device=DEVICE)[1:].view(150, 257)
    weight = torch.randn(257, 33, device=DEVICE).t()  # a transposed view: strides (1, 33)
    bias = torch.randn(33, device=DEVICE)
    with torch.inference_mode():
        eager = F.linear(x, weight, bias)
        with samebits.batch_invariant():
            out = F.linear(x, weight, bias)
            alone = [F.linear(x[r : r + 1].clone(), weight, bias)[0] for r in (0, 75, 149)]
    same = all(torch.equal(out[r], a) for r, a in zip((0, 75, 149), alone))
    bounded, errors = error_bound(out, eager, x.double() @ weight.double().t() + bias.double())
    rows.append(row("kernels-edges", 0, f"identical={same}; {errors}", passed(same and bounded)))
    # (batch, head) pairs past CUDA's grid z of 65,535: 4096 rows x 17 heads
    q = torch.randn(4096, 17, 4, 8, device=DEVICE)
    with torch.inference_mode():
        eager = F.scaled_dot_product_attention(q, q, q)
        with samebits.batch_invariant():
            out = F.scaled_dot_product_attention(q, q, q)
            alone = F.scaled_dot_product_attention(q[4095:], q[4095:], q[4095:])
    bounded, errors = error_bound(out, eager, F.scaled_dot_product_attention(q.double(), q.double(), q.double()))
    same = torch.equal(out[4095:], alone)
    rows.append(row("kernels-edges", 1, f"identical={same}; {errors}", passed(same and bounded)))
    # softmax over a middle dim: dense, as torch's, so a .view() works
    x = torch.randn(64, 10, 7, device=DEVICE)
    with torch.inference_mode(), samebits.batch_invariant():
        soft = torch.softmax(x, 1)
        viewed = soft.view(64, 70).shape == (64, 70)
    close = torch.allclose(soft, x.softmax(1), rtol=1e-5, atol=1e-6)
    observed = f"strides {tuple(soft.stride())}; view {viewed}; close {close}"
    rows.append(row("kernels-edges", 2, observed, passed(soft.stride() == (70, 7, 1) and viewed and close)))
    # a second GPU's tensors with the first current
    if torch.cuda.device_count() < 2:
        rows.append(row("kernels-edges", 3, "", "skipped: fewer than two GPUs here"))
    else:
        torch.cuda.set_device(0)
        a, w = torch.randn(70, 33, device="cuda:1"), torch.randn(9, 33, device="cuda:1")
        with torch.inference_mode(), samebits.batch_invariant():
            out, one = F.linear(a, w), F.linear(a[5:6], w)
        ok = out.device == torch.device("cuda", 1) and torch.equal(out[5:6], one)
        rows.append(row("kernels-edges", 3, f"on {out.device}", passed(ok)))
    return rows


def transformers_models() -> list[Row]:
    import samebits

    if importlib.util.find_spec("transformers") is None:
        return rows_all("transformers", "", "skipped: transformers not installed")
    if reason := kernels_missing():
        return rows_all("transformers", "", f"skipped: {reason}")
    import transformers

    small = {"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 32}
    models = {
        "gpt2": lambda: transformers.GPT2Model(
            transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32)
        ),
        "bert": lambda: transformers.BertModel(transformers.BertConfig(hidden_size=64, intermediate_size=128, **small)),
        "llama": lambda: transformers.LlamaModel(
            transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_key_value_heads=2, **small)
        ),
    }
    needed = {"gpt2": {"addmm"}, "bert": {"linear"}, "llama": {"linear", "mean"}}  # GPT-2's Conv1D is addmm
    rows = []
    for i, name in enumerate(models):
        torch.manual_seed(7)
        model = models[name]().eval().to(DEVICE)
        ids = torch.randint(0, 100, (8, 16), device=DEVICE)
        mask = torch.ones(8, 16, dtype=torch.long, device=DEVICE)
        mask[1, 10:] = 0
        with torch.inference_mode():
            eager = model(input_ids=ids, attention_mask=mask)[0]
            ran, stop = spy_on_kernels()
            try:
                with samebits.batch_invariant():
                    batch = model(input_ids=ids, attention_mask=mask)[0]
                    alone = sum(
                        torch.equal(batch[r], model(input_ids=ids[r : r + 1], attention_mask=mask[r : r + 1])[0][0])
                        for r in range(8)
                    )
            finally:
                stop()
            exact = model.double()(input_ids=ids, attention_mask=mask)[0]
        bounded, errors = error_bound(batch, eager, exact)
        covered = (needed[name] | {"scaled_dot_product_attention"}) <= ran
        observed = f"{alone}/8; ran {', '.join(sorted(ran))}; {errors}"
        rows.append(row("transformers", i, observed, passed(alone == 8 and covered and bounded)))
    return rows


STRICT_OPS: dict[str, Callable[[torch.Tensor], Any]] = {
    "kthvalue": lambda x: torch.kthvalue(x, 2, dim=1).values,
    "median": lambda x: torch.median(x, dim=1).values,
    "histc": lambda x: torch.histc(x, bins=10),
    "bincount": lambda x: torch.bincount((x[:, 0] * 4).long().clamp(0, 7), weights=x[:, 1]),
    "scatter_reduce": lambda x: torch.zeros(8, device=x.device).scatter_reduce(
        0, (x[:, 0] * 4).long().clamp(0, 7), x[:, 1], "prod"
    ),
}


class StrictOp(torch.nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def forward(self, x: torch.Tensor) -> Any:
        return STRICT_OPS[self.name](x)


def determinism() -> list[Row]:
    import samebits
    from samebits.errors import UserError

    rows = []
    rc, result, tail = fresh(
        """
        import os, torch, samebits
        from samebits.determinism import catalog
        with samebits.deterministic(0, device=DEVICE) as record:
            a = torch.randn(64, 64, device=DEVICE)
            (a @ a).sum().item()
            report({"set": os.environ.get("CUBLAS_WORKSPACE_CONFIG"), "checks": catalog.torch_checks_cublas_workspace()})
        """
    )
    if rc != 0 or result is None:
        rows.append(row("determinism", 0, child_failed(rc, tail), "FAIL"))
    else:
        ok = (result["set"] is not None) == result["checks"]
        observed = f"set {result['set']}; torch checks it: {result['checks']}"
        rows.append(row("determinism", 0, observed, passed(ok)))
    raising = []
    x = torch.rand(8, 8, device=DEVICE)
    torch.use_deterministic_algorithms(True)
    try:
        for name, op in STRICT_OPS.items():
            try:
                op(x)
            except RuntimeError as exc:
                if "deterministic" in str(exc):
                    raising.append(name)
    finally:
        torch.use_deterministic_algorithms(False)
    rows.append(row("determinism", 1, ", ".join(raising) or "none", "info"))
    if not raising:
        rows.append(row("determinism", 2, "", "skipped: no op raised under deterministic algorithms"))
    else:
        try:
            samebits.Predictor(StrictOp(raising[0]), device=DEVICE, example_inputs=x, deterministic=True).close()
            said = "no error"
        except UserError as exc:
            said = str(exc)
        named = raising[0] in said and "no batch size" not in said
        rows.append(row("determinism", 2, said[:110], passed(named)))
    a, b = torch.randn(1024, 1024, device=DEVICE), torch.randn(1024, 1024, device=DEVICE)
    exact = (a.double() @ b.double()).float()

    def err() -> float:
        return float(((a @ b) - exact).abs().max() / exact.abs().max())

    with samebits.deterministic(0):
        strict = err()
    with samebits.fast():
        fast = err()
    default = err()
    observed = f"deterministic {strict:.1e}, fast {fast:.1e}, default {default:.1e}"
    rows.append(row("determinism", 3, observed, passed(strict < 1e-5)))
    return rows


DIGESTS = """
import sys, torch, samebits
sys.path.insert(0, BENCH)
from gpu_verify import Block  # the same block as the kernel rows
torch.manual_seed(0)
conv = torch.nn.Sequential(
    torch.nn.Conv2d(3, 37, 5, padding=2), torch.nn.ReLU(), torch.nn.Conv2d(37, 61, 3, stride=2),
    torch.nn.ReLU(), torch.nn.Conv2d(61, 13, 7, padding=3),
).to(DEVICE).eval()
x = torch.randn(5, 3, 67, 93, generator=torch.Generator().manual_seed(1)).to(DEVICE)
torch.manual_seed(3)
block = Block().to(DEVICE).eval()
y = torch.randn(16, 32, 256, generator=torch.Generator().manual_seed(2)).to(DEVICE)
out = {}
with torch.inference_mode():
    out["default"] = samebits.digest(conv(x))
    with samebits.deterministic(0):
        out["deterministic"] = samebits.digest(conv(x))
    with samebits.batch_invariant():
        out["batch_invariant"] = samebits.digest(block(y))
    with samebits.fast():  # cudnn.benchmark: last, so its choices reach no other digest
        out["fast"] = samebits.digest(conv(x))
report(out)
"""


def fresh_processes() -> list[Row]:
    code = DIGESTS.replace("BENCH", repr(str(REPO / "bench")))
    runs = [fresh(code, timeout=150) for _ in range(2)]
    bad = next((r for r in runs if r[0] != 0 or r[1] is None), None)
    if bad is not None:
        return rows_all("fresh-processes", child_failed(bad[0], bad[2]), "FAIL")
    first, second = runs[0][1], runs[1][1]
    rows = []
    for i, (key, must) in enumerate(
        (("deterministic", True), ("batch_invariant", True), ("default", False), ("fast", False))
    ):
        same = first[key] == second[key]
        rows.append(row("fresh-processes", i, f"{1 if same else 2} digest(s)", passed(same) if must else "info"))
    return rows


def record_verify() -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        golden, report = Path(folder) / "g.safetensors", Path(folder) / "v.json"
        cli = [sys.executable, "-m", "samebits"]
        rc, out = run_child([*cli, "record", "demo:mlp", "-o", str(golden), "--device", DEVICE], 120)
        if rc != 0:
            return [row("record-verify", 0, child_failed(rc, out.strip()[-300:]), "FAIL")]
        rc, out = run_child([*cli, "verify", str(golden), "--device", DEVICE, "--json", str(report)], 120)
        if rc not in (0, 1) or not report.exists():
            return [row("record-verify", 0, child_failed(rc, out.strip()[-300:]), "FAIL")]
        result = json.loads(report.read_text())
    observed = f"policy {result['policy']}, verdict {result['verdict']}"
    return [row("record-verify", 0, observed, passed((result["policy"], result["verdict"]) == ("exact", "identical")))]


def predictor_rows() -> list[Row]:
    import samebits

    rows = []
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(96, 257), torch.nn.GELU(), torch.nn.Linear(257, 11)).eval()
    x = torch.randn(37, 96)
    for i, tiles in enumerate((False, True)):
        ran, stop = spy_on_kernels()
        try:
            with samebits.Predictor(
                model, device=DEVICE, example_inputs=x[:8], deterministic=False, batch_invariant=tiles
            ) as p:
                whole = p.predict(x)
                alone = torch.stack([p.predict_one(r) for r in x[:9]])
                view = torch.randn(5 * 96 + 3)[3:].reshape(5, 96)  # at an offset, as a file maps tensors
                offset = torch.equal(p.predict(view), p.predict(view.clone()))
                sizes = p.invariance.sizes
        finally:
            stop()
        same = torch.equal(whole[:9], alone) and offset
        kernels = bool({"linear", "addmm"} & ran)
        observed = f"identical={same}, sizes {sizes}" + (
            f"; kernels ran {', '.join(sorted(ran)) or 'none'}" if tiles else ""
        )
        rows.append(row("predictor", i, observed, passed(same and (kernels or not tiles))))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 64)).eval()
    verdicts = []
    for tiled in (False, True):
        report = samebits.check(model, torch.randn(8, 256), axes=("batch",), device=DEVICE, batch_invariant=tiled)
        verdicts.append({a.axis: a.verdict for a in report.axes}["batch"])
    rows.append(row("predictor", 2, " -> ".join(verdicts), passed(verdicts[1] == "identical")))
    return rows


class Outer(torch.nn.Module):
    """4 MB of activations a row: past a 1 GiB share of the GPU by 256 rows."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x[:, :, None] * x[:, None, :]).sum(-1)


def out_of_memory() -> list[Row]:
    import samebits
    from samebits.measure.memory import default_memory_cap_mb

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(2**30 / total)  # 1 GiB of this GPU
    try:
        budget = default_memory_cap_mb("cuda")
        torch.cuda.empty_cache()
        reserved_before = torch.cuda.memory_reserved()
        ooms_before = torch.cuda.memory_stats().get("num_ooms", 0)
        with samebits.Predictor(
            Outer(),
            device="cuda",
            example_inputs=torch.randn(2, 1024),
            max_batch_size="auto",
            memory_budget_mb=10**7,
            invariant=False,
            deterministic=False,
        ) as p:  # fmt: skip  (a budget that never binds: only running out of memory stops the search)
            chosen, measured = p.max_batch_size, sorted(p.memory.peak_mb_by_batch) if p.memory else []
        ooms = torch.cuda.memory_stats().get("num_ooms", 0) - ooms_before
        reserved_after = torch.cuda.memory_reserved()
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    backed_off = ooms > 0 and bool(measured) and chosen == measured[-1]
    dropped = reserved_after <= reserved_before + 64 * 2**20
    observed = (
        f"{ooms} OOM(s); max_batch_size {chosen} (measured {measured}); reserved "
        f"{reserved_before / 2**20:.0f} -> {reserved_after / 2**20:.0f} MB"
    )
    return [
        row("out-of-memory", 0, observed, passed(backed_off and dropped)),
        row("out-of-memory", 1, f"{budget:.0f} MB", passed(budget <= 256.5)),
    ]


BACKEND_CHILD = """
import torch, samebits
from pathlib import Path
from samebits.models.inputs import ModelInputs
from samebits.runtime.backends import build
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval().to(DEVICE)
x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1)).to(DEVICE)
built = build(NAME, m, ModelInputs((x,), {}), Path(FOLDER), "gpu-verify", device="cuda:0")
with torch.inference_mode():
    out, eager = built.runner(x), m(x)
out = out[0] if isinstance(out, (tuple, list)) else out
info = {"built_here": built.built_here, "digest": samebits.digest(out.cpu()),
        "diff": float((out.cpu().double() - eager.cpu().double()).abs().max())}
if NAME == "tensorrt":
    from samebits.runtime.backends.tensorrt import distributive_independence, graph_split
    info["engines"], info["torch_ops"] = graph_split(torch.export.load(str(built.artifact)).graph)
    with distributive_independence() as why_not:
        info["distributive_independence"] = why_not or "set"
else:
    info["providers"] = list(built.runner.session.session.get_providers())
report(info)
"""

BACKENDS = {  # backend -> (the package it needs, the provider it must run first)
    "tensorrt": ("torch_tensorrt", None),
    "onnxruntime": ("onnxruntime", "CUDAExecutionProvider"),
    "onnxruntime-tensorrt": ("onnxruntime", "TensorrtExecutionProvider"),
}


def backend_row(name: str) -> list[Row]:
    """One engine (not one per batch size) built in a fresh process and loaded in another."""
    check = f"backend:{name}"
    package, provider = BACKENDS[name]
    if importlib.util.find_spec(package) is None:
        return rows_all(check, "", f"skipped: {package} not installed")
    from samebits.runtime.backends import REGISTRY

    if reason := REGISTRY[name].unavailable("cuda:0"):
        return rows_all(check, "", f"skipped: {reason[:100]}")
    with tempfile.TemporaryDirectory() as folder:
        code = BACKEND_CHILD.replace("NAME", repr(name)).replace("FOLDER", repr(folder))
        runs = [fresh(code, timeout=280) for _ in range(2)]
    bad = next((r for r in runs if r[0] != 0 or r[1] is None), None)
    if bad is not None:
        return rows_all(check, child_failed(bad[0], bad[2]), "FAIL")
    first, second = runs[0][1], runs[1][1]
    once = first["built_here"] and not second["built_here"]
    same = first["digest"] == second["digest"]
    if provider is None:
        where = (
            f"{first['engines']} engine(s), {first['torch_ops']} op(s) in PyTorch; "
            f"DISTRIBUTIVE_INDEPENDENCE: {first['distributive_independence']}"
        )
        placed = first["engines"] > 0
    else:
        where = f"providers {first['providers'][0]} / {second['providers'][0]}"
        placed = first["providers"][0] == second["providers"][0] == provider
    observed = f"built here {first['built_here']}/{second['built_here']}; same={same}; {where}; |diff| vs eager {first['diff']:.1e}"
    return [row(check, 0, observed, passed(once and same and placed))]


@dataclasses.dataclass
class Check:
    name: str
    run: Callable[[], list[Row]]
    cap: float  # seconds this check may take at most, its child killed past it


CHECKS: list[Check] = [
    Check("kernels-block", kernels_block, 150),
    Check("kernels-edges", kernels_edges, 90),
    Check("transformers", transformers_models, 120),
    Check("determinism", determinism, 90),
    Check("fresh-processes", fresh_processes, 150),
    Check("record-verify", record_verify, 120),
    Check("predictor", predictor_rows, 150),
    Check("out-of-memory", out_of_memory, 90),
    Check("backend:tensorrt", lambda: backend_row("tensorrt"), 300),
    Check("backend:onnxruntime", lambda: backend_row("onnxruntime"), 150),
    Check("backend:onnxruntime-tensorrt", lambda: backend_row("onnxruntime-tensorrt"), 300),
]


def run_one(name: str) -> list[Row]:
    """The rows of check ``name``, here (the child's side): a check that raises is one FAIL row
    per claim, never the end of the run."""
    check = next(c for c in CHECKS if c.name == name)
    try:
        return check.run()
    except Exception as exc:
        return rows_all(name, f"{type(exc).__name__}: {str(exc)[:150]}", "FAIL")


def run(budget: float, cuda: bool) -> list[Row]:
    """Every check in order, each in a fresh child under its cap and what is left of ``budget``."""
    rows: list[Row] = []
    started = time.monotonic()
    for check in CHECKS:
        if not cuda:
            rows += rows_all(check.name, "", SKIP_NO_CUDA)
            continue
        left = budget - (time.monotonic() - started)
        if left < 10:
            rows += rows_all(check.name, "", f"skipped: past the {budget:.0f} s budget")
            continue
        limit = min(check.cap, left)
        t = time.monotonic()
        rc, out = run_child([sys.executable, str(Path(__file__).resolve()), "--check", check.name], limit)
        got = marked(out)
        if got is None and rc is None and limit < check.cap:  # cut short by the run's budget, not its cap
            got = [dataclasses.asdict(r) for r in rows_all(check.name, "", f"skipped: past the {budget:.0f} s budget")]
        elif got is None:
            why = f"killed at its {limit:.0f} s cap" if rc is None else child_failed(rc, out.strip()[-300:])
            got = [dataclasses.asdict(r) for r in rows_all(check.name, why.replace("\n", " / "), "FAIL")]
        rows += [Row(**{**r, "seconds": round(time.monotonic() - t, 1)}) for r in got]
    return rows


def render(rows: list[Row], device: str) -> str:
    head = ("claim", "expected", "observed", "verdict", "s")
    lines = [f"gpu_verify on {device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", ""]
    lines.append(" | ".join(head))
    lines.append(" | ".join("---" for _ in head))
    lines += [" | ".join((r.claim, r.expected, r.observed, r.verdict, f"{r.seconds:g}")) for r in rows]
    return "\n".join(lines)


class Arguments(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # bad input: one line, exit 2
        self.exit(2, f"gpu_verify: error: {message}\n")


def main() -> int:
    parser = Arguments(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--budget", type=float, default=330, help="seconds for every check together (default 330)")
    parser.add_argument("--check", choices=[c.name for c in CHECKS], help=argparse.SUPPRESS)  # a child's one check
    args = parser.parse_args()
    if not args.budget > 0:
        parser.error(f"--budget must be a positive number of seconds, not {args.budget:g}")
    if args.check:
        print(MARK + json.dumps([dataclasses.asdict(r) for r in run_one(args.check)]), flush=True)
        return 0
    cuda = torch.cuda.is_available() and DEVICE == "cuda"
    device = torch.cuda.get_device_name(0) if cuda else "no CUDA device"
    rows = run(args.budget, cuda)
    print(render(rows, device))
    if args.json:
        try:
            Path(args.json).write_text(
                json.dumps({"device": device, "rows": [dataclasses.asdict(r) for r in rows]}, indent=1)
            )
        except OSError as exc:
            parser.error(f"cannot write {args.json}: {exc.strerror}")
    return 1 if any(r.verdict == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
