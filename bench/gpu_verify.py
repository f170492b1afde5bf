"""One prepared run that checks every GPU claim samebits makes, in under 6 minutes on one GPU.

    python bench/gpu_verify.py [--json PATH] [--budget SECONDS]

Prints one table: claim, expected, observed, verdict (``pass``, ``FAIL``, ``info``, or
``skipped: <why>``). On a machine without CUDA every GPU row is ``skipped: no CUDA`` and the
run takes seconds (tests/test_gpu_verify.py runs it that way). Its output is the evidence the
docs cite for each GPU claim ("verified on GPU (date, device)"); a claim no run has shown says
"not yet run on a GPU".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
SKIP_NO_CUDA = "skipped: no CUDA"


@dataclasses.dataclass
class Row:
    claim: str
    expected: str
    observed: str
    verdict: str  # "pass" | "FAIL" | "info" | "skipped: <why>"
    seconds: float = 0.0


def fresh(code: str, timeout: float = 120) -> tuple[int, str]:
    """``code`` in a fresh interpreter (samebits from this checkout): its exit code and output."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def deterministic_without_the_variable() -> Row:
    claim = "deterministic(device='cuda') with CUBLAS_WORKSPACE_CONFIG unset: a GEMM runs"
    code, out = fresh(
        """
        import os, torch, samebits
        with samebits.deterministic(0, device="cuda") as record:
            a = torch.randn(64, 64, device="cuda")
            (a @ a).sum().item()
            print(os.environ.get("CUBLAS_WORKSPACE_CONFIG"), "|", record["CUBLAS_WORKSPACE_CONFIG"].note)
        """
    )
    ok = code == 0
    return Row(claim, "no error; the variable set", out.splitlines()[-1][:90] if out else "", "pass" if ok else "FAIL")


STRICT_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
    "kthvalue": lambda x, i: torch.kthvalue(x, 2, dim=1),
    "median(dim)": lambda x, i: torch.median(x, dim=1),
    "histc": lambda x, i: torch.histc(x, bins=10),
    "bincount(weights)": lambda x, i: torch.bincount(i, weights=x[:, 0]),
    "scatter_reduce(prod)": lambda x, i: torch.zeros(8, device=x.device).scatter_reduce(0, i, x[:, 0], "prod"),
    "MaxUnpool1d": lambda x, i: torch.nn.functional.max_unpool1d(
        *torch.nn.functional.max_pool1d(x[None], 2, return_indices=True), 2
    ),
}


def strict_op_survey() -> Row:
    raising = []
    torch.use_deterministic_algorithms(True)
    try:
        x = torch.rand(8, 8, device="cuda")
        i = torch.randint(0, 8, (8,), device="cuda")
        for name, op in STRICT_OPS.items():
            try:
                op(x, i)
            except RuntimeError as exc:
                if "deterministic" in str(exc):
                    raising.append(name)
    finally:
        torch.use_deterministic_algorithms(False)
    return Row(
        "ops without a deterministic CUDA kernel raise under deterministic()",
        "listed (the Predictor names the op, not 'no size is invariant')",
        ", ".join(raising) or "none",
        "info",
    )


def tf32_error() -> Row:
    import samebits

    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    exact = (a.double() @ b.double()).float()

    def err() -> float:
        return float(((a @ b) - exact).abs().max() / exact.abs().max())

    with samebits.deterministic(0):
        strict = err()
    with samebits.fast():
        fast = err()
    default = err()
    ok = strict < 1e-5
    observed = f"deterministic {strict:.1e}, fast {fast:.1e}, default {default:.1e}"
    return Row(
        "TF32 off under deterministic() (relative error vs float64)",
        "deterministic < 1e-5",
        observed,
        "pass" if ok else "FAIL",
    )


CONV_STACK = """
import torch, samebits
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Conv2d(3, 37, 5, padding=2), torch.nn.ReLU(), torch.nn.Conv2d(37, 61, 3, stride=2),
    torch.nn.ReLU(), torch.nn.Conv2d(61, 13, 7, padding=3),
).cuda().eval()
x = torch.randn(5, 3, 67, 93, generator=torch.Generator().manual_seed(1)).cuda()
with {context}, torch.inference_mode():
    print(samebits.digest(m(x)))
"""


def three_processes() -> list[Row]:
    rows = []
    for name, context, must_agree in (
        ("default", "torch.no_grad()", False),
        ("fast() (cudnn.benchmark)", "samebits.fast()", False),
        ("deterministic()", "samebits.deterministic(0)", True),
    ):
        digests = set()
        for _ in range(3):
            code, out = fresh(CONV_STACK.format(context=context))
            digests.add(out.splitlines()[-1][:16] if code == 0 else f"error: {out[-80:]}")
        verdict = ("pass" if len(digests) == 1 else "FAIL") if must_agree else "info"
        rows.append(
            Row(
                f"odd conv stack, 3 fresh processes, {name}",
                "1 digest" if must_agree else "measured",
                f"{len(digests)} digest(s)",
                verdict,
            )
        )
    return rows


def predictor_invariance() -> Row:
    import samebits

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(96, 257), torch.nn.GELU(), torch.nn.Linear(257, 11)).eval()
    x = torch.randn(37, 96)
    with samebits.Predictor(model, device="cuda", example_inputs=x[:8], deterministic=False) as p:
        whole = p.predict(x)
        alone = torch.stack([p.predict_one(r) for r in x[:9]])
        buffer = torch.randn(5 * 96 + 3)
        view = buffer[3:].reshape(5, 96)  # at an offset, as a file maps tensors
        offset = torch.equal(p.predict(view), p.predict(view.clone()))
        same = torch.equal(whole[:9], alone) and offset
        sizes = p.invariance.sizes
    return Row(
        "Predictor on CUDA: a row's bits in any batch (37 rows vs each alone)",
        "identical",
        f"identical={same}, sizes {sizes}",
        "pass" if same else "FAIL",
    )


def oom_backoff() -> Row:
    import samebits

    torch.cuda.set_per_process_memory_fraction(0.02)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 16)).eval()
        with samebits.Predictor(
            model, device="cuda", example_inputs=torch.randn(2, 4096), max_batch_size="auto", deterministic=False
        ) as p:
            chosen = p.max_batch_size
        return Row(
            "max_batch_size='auto' under a 2% memory fraction backs off",
            "a size, no crash",
            f"max_batch_size {chosen}",
            "pass",
        )
    except Exception as exc:
        return Row(
            "max_batch_size='auto' under a 2% memory fraction backs off",
            "a size, no crash",
            f"{type(exc).__name__}: {str(exc)[:60]}",
            "FAIL",
        )
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


def batch_invariant_check() -> Row:
    import samebits

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 64)).eval()
    x = torch.randn(8, 256)
    verdicts = [
        {
            a.axis: a.verdict
            for a in samebits.check(model, x, axes=("batch",), device="cuda", batch_invariant=tiled).axes
        }["batch"]
        for tiled in (False, True)
    ]
    ok = verdicts[1] == "identical"
    return Row(
        "check's batch axis on CUDA: plain, then under batch_invariant()",
        "identical under it",
        " -> ".join(verdicts),
        "pass" if ok else "FAIL",
    )


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


def _changed_places(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int:
    """How many (batch size, row) places give a row other bits than it gets alone."""
    changed = 0
    for n in (n for n in (1, 3, 64, 65, 200) if n <= len(x)):
        out = fn(x[:n])
        changed += sum(not torch.equal(out[r], fn(x[r : r + 1])[0]) for r in {0, n // 2, n - 1})
    return changed


def _forward_ms(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, rounds: int = 20) -> float:
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    fn(x)
    sync()
    t = time.perf_counter()
    for _ in range(rounds):
        fn(x)
    sync()
    return (time.perf_counter() - t) / rounds * 1e3


def fixed_order_kernels(device: str = "cuda", width: int = 256, length: int = 32, count: int = 200) -> list[Row]:
    import samebits
    from samebits.runtime import fixed_order

    claim = "batch_invariant() on CUDA: fixed-order Triton kernels, a row's bits at every place"
    if reason := fixed_order.unavailable():
        return [Row(claim, "0 places differ", "", f"skipped: {reason}")]
    rows = []
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        block = Block(width).to(device, dtype).eval()
        x = torch.randn(count, length, width, device=device, dtype=dtype)
        with torch.inference_mode():
            plain = _changed_places(block, x)
            plain_ms = _forward_ms(block, x[:64])
            with samebits.batch_invariant(kernels=True):  # what CUDA tensors take by default
                fixed = _changed_places(block, x)
                fixed_ms = _forward_ms(block, x[:64])
                ours = block(x[:64]).float()
            error = (ours - block(x[:64]).float()).abs().max().item()
        rows.append(Row(f"{claim} ({dtype})", "0 places differ", f"{fixed} (plain: {plain}); max |diff| {error:.1e}",
                        "pass" if fixed == 0 else "FAIL"))  # fmt: skip
        rows.append(Row(f"fixed-order kernels' cost, batch 64 ({dtype})", "measured", f"{plain_ms:.2f} ms plain, "
                        f"{fixed_ms:.2f} ms kernels ({plain_ms / fixed_ms:.2f}x)", "info"))  # fmt: skip
    return rows


def backend_in_new_process(backend: str, package: str) -> Row:
    claim = f"{backend}: built once, loaded with the same bits in a new process"
    try:
        __import__(package)
    except ImportError:
        return Row(claim, "identical", "", f"skipped: {package} not installed")
    from samebits.runtime.backends import REGISTRY

    if reason := REGISTRY[backend].unavailable("cuda:0"):
        return Row(claim, "identical", "", f"skipped: {reason[:100]}")
    code = f"""
        import torch, samebits, sys
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
        x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1))
        with samebits.Predictor(m, device="cuda", backend="{backend}", example_inputs=x, cache_dir=sys.argv[-1] if len(sys.argv) > 1 else None) as p:
            print(p.artifacts and next(iter(p.artifacts.values())).built_here, samebits.digest(p.predict(x))[:16])
    """
    first = fresh(code, timeout=300)
    second = fresh(code, timeout=300)
    if first[0] or second[0]:
        return Row(claim, "identical", (first[1] or second[1])[-80:], "FAIL")
    a, b = first[1].splitlines()[-1], second[1].splitlines()[-1]
    same = a.split()[-1] == b.split()[-1]
    return Row(claim, "identical", f"{a} / {b}", "pass" if same else "FAIL")


CHECKS: list[tuple[str, Callable[[], Row | list[Row]]]] = [
    ("deterministic() without the variable", deterministic_without_the_variable),
    ("strict-mode op survey", strict_op_survey),
    ("TF32 error", tf32_error),
    ("three fresh processes", three_processes),
    ("Predictor batch invariance", predictor_invariance),
    ("OOM back-off", oom_backoff),
    ("TensorRT", lambda: backend_in_new_process("tensorrt", "torch_tensorrt")),
    ("ONNX Runtime CUDA", lambda: backend_in_new_process("onnxruntime", "onnxruntime")),
    ("ONNX Runtime TensorRT", lambda: backend_in_new_process("onnxruntime-tensorrt", "onnxruntime")),
    ("fixed-order kernels", fixed_order_kernels),
    ("check's batch axis under batch_invariant()", lambda: batch_invariant_check()),
]


def run(budget: float) -> list[Row]:
    rows: list[Row] = []
    started = time.monotonic()
    for name, check in CHECKS:
        if not torch.cuda.is_available():
            rows.append(Row(name, "", "", SKIP_NO_CUDA))
            continue
        if time.monotonic() - started > budget:
            rows.append(Row(name, "", "", f"skipped: past the {budget:.0f} s budget"))
            continue
        t = time.monotonic()
        try:
            got = check()
        except Exception as exc:  # one check's failure is a row, never the end of the run
            got = Row(name, "", f"{type(exc).__name__}: {str(exc)[:80]}", "FAIL")
        for row in got if isinstance(got, list) else [got]:
            row.seconds = round(time.monotonic() - t, 1)
            rows.append(row)
    return rows


def render(rows: list[Row], device: str) -> str:
    head = ("claim", "expected", "observed", "verdict")
    lines = [f"gpu_verify on {device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", ""]
    lines.append(" | ".join(head))
    lines.append(" | ".join("---" for _ in head))
    lines += [" | ".join((r.claim, r.expected, r.observed, r.verdict)) for r in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--budget", type=float, default=330, help="seconds before remaining checks are skipped")
    args = parser.parse_args()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    rows = run(args.budget)
    print(render(rows, device))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"device": device, "rows": [dataclasses.asdict(r) for r in rows]}, indent=1)
        )
    return 1 if any(r.verdict == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
