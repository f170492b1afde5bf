"""The fixed-order Triton kernels behind ``batch_invariant()`` on CUDA, run here by Triton's
interpreter on CPU tensors: a row's bits alone equal its bits at any place in any batch, the
values equal torch's, and what the kernels do not cover falls back to the tiles. What a GPU's
own compiler and tensor cores make of them is not run here (bench/gpu_verify.py's rows)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import samebits
from conftest import changed_places
from samebits.errors import UserError
from samebits.runtime import fixed_order

pytest.importorskip("triton", reason="the fixed-order kernels need Triton (pip install triton)")

# Triton's interpreter is chosen when triton is imported: the kernels' tests run in a child
# process started with TRITON_INTERPRET=1 (this file again), not in the suite's own process.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
interpreted = pytest.mark.skipif(
    not INTERPRETED, reason="run under TRITON_INTERPRET=1 by test_the_kernels_in_a_child_under_tritons_interpreter"
)


PARENT_ONLY, NOT_INTERPRETED = "this is the child", "the interpreter is what this asks for"


# Triton's interpreter runs tl.dot as numpy.matmul, so there a kernel's rows are only as alike as
# numpy's BLAS makes them: OpenBLAS's Haswell kernels give the rows of one 64-row block other bits
# by position (measured on AMD EPYC, where OPENBLAS_CORETYPE=Haswell is what Zen picks and what
# the machine sets). The kernels' own order is what is under test, so the child runs numpy on a
# kernel set, measured first, whose rows are alike; on a GPU no numpy is involved.
BLOCK_ROWS_ALIKE = """
import numpy as np
rng = np.random.default_rng(0)
for k, n in ((32, 32), (32, 64), (40, 50)):
    a, b = rng.standard_normal((1, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    out = np.matmul(np.repeat(a, 64, 0), b)
    assert all(np.array_equal(out[p], out[0]) for p in range(64))
"""


def numpy_blas_with_alike_rows() -> dict[str, str] | None:
    """The environment (OpenBLAS's kernel set) under which numpy's matmul gives every row of a
    block the same bits, the machine's own first; ``None`` where no set tried does."""
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    mine = os.environ.get("OPENBLAS_CORETYPE")
    for core in dict.fromkeys([mine, None, "Sandybridge", "Nehalem"]):
        env = {**base, **({"OPENBLAS_CORETYPE": core} if core else {})}
        if subprocess.run([sys.executable, "-c", BLOCK_ROWS_ALIKE], env=env, capture_output=True).returncode == 0:
            return env
    return None


@pytest.mark.skipif(INTERPRETED, reason=PARENT_ONLY)
def test_the_kernels_in_a_child_under_tritons_interpreter():
    env = numpy_blas_with_alike_rows()
    if env is None:
        pytest.skip("numpy's BLAS here gives the rows of one block other bits by position under every kernel set tried")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", __file__],
        env={**env, "TRITON_INTERPRET": "1"},
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    summary = child.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary
    skipped = [line for line in child.stdout.splitlines() if line.startswith("SKIPPED")]
    # only the tests that belong to this process skip there: every kernel test ran
    assert all(PARENT_ONLY in line or NOT_INTERPRETED in line for line in skipped), skipped


def spy_on_kernels(monkeypatch) -> set:
    """The ops the kernels ran (not those they handed back to the tiles) from now on."""
    ran: set = set()
    real = fixed_order.call

    def call(func, *rest):
        out = real(func, *rest)
        if out is not NotImplemented:
            ran.add(func)
        return out

    monkeypatch.setattr(fixed_order, "call", call)
    return ran


# rows at the start and, where the batch has them, in another tile of rows
places_that_change_bits = functools.partial(changed_places, sizes=(1, 2, 3, 17, 64, 65, 100))


@interpreted
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmuls_give_a_row_its_bits_at_every_place_in_every_batch_and_torchs_values(dtype):
    torch.manual_seed(0)
    x = torch.randn(100, 70).to(dtype)
    weight, bias = torch.randn(50, 70).to(dtype), torch.randn(50).to(dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-3, "atol": 2e-3}

    def linear(rows):
        return fixed_order.linear(rows, weight, bias)  # the weight read transposed, in place

    assert places_that_change_bits(linear, x) == []
    torch.testing.assert_close(linear(x), F.linear(x.float(), weight.float(), bias.float()).to(dtype), **tol)
    reference = torch.addmm(torch.ones(100, 50), x.float(), weight.t().float(), beta=0.5, alpha=2.0)
    torch.testing.assert_close(fixed_order.mm(x, weight.t(), torch.ones(100, 50).to(dtype), beta=0.5, alpha=2.0),
                               reference.to(dtype), **tol)  # fmt: skip


@interpreted
def test_batched_matmuls_and_broadcast_batch_dims():
    torch.manual_seed(1)
    a, b = torch.randn(6, 3, 33, 40), torch.randn(3, 40, 20)
    out = fixed_order.matmul(a, b)
    torch.testing.assert_close(out, torch.matmul(a, b), rtol=1e-5, atol=1e-5)
    assert torch.equal(fixed_order.matmul(a[:1], b), out[:1]) and torch.equal(fixed_order.matmul(a[4:5], b), out[4:5])
    bias = torch.randn(6 * 3, 1, 20)
    got = fixed_order.bmm(a.reshape(18, 33, 40), b.repeat(6, 1, 1), bias)
    torch.testing.assert_close(got, torch.baddbmm(bias, a.reshape(18, 33, 40), b.repeat(6, 1, 1)), rtol=1e-5, atol=1e-5)


@interpreted
def test_softmax_and_mean_reduce_each_row_in_one_fixed_order():
    torch.manual_seed(2)
    wide = torch.randn(70, 2, 600)  # 600 columns: three blocks of 256 per row
    wide[5, 1, :400] = float("-inf")  # a masked prefix
    for x, dim in ((wide, -1), (torch.randn(70, 5, 8), 1)):
        for log in (False, True):

            def soft(rows, dim=dim, log=log):
                return fixed_order.softmax(rows, dim, log=log)

            assert places_that_change_bits(soft, x, sizes=(1, 3, 64, 70)) == []
            reference = x.log_softmax(dim) if log else x.softmax(dim)
            torch.testing.assert_close(soft(x), reference, rtol=1e-5, atol=1e-6)
    y = wide.clamp(min=-5)

    def row_mean(rows):
        return fixed_order.mean(rows, [1, 2], keepdim=True)

    assert places_that_change_bits(row_mean, y) == []
    torch.testing.assert_close(row_mean(y), y.mean([1, 2], keepdim=True), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fixed_order.mean(y, -1), y.mean(-1), rtol=1e-5, atol=1e-6)
    assert fixed_order.softmax(y.half(), -1, dtype=torch.float32).dtype == torch.float32  # _softmax's half_to_float
    # a reduction over the batch's own dim, float64 and a dropout are not theirs to run
    assert fixed_order.mean(y, 0) is NotImplemented and fixed_order.softmax(y, 0) is NotImplemented
    assert fixed_order.linear(y.double(), torch.randn(4, 600, dtype=torch.float64)) is NotImplemented
    assert fixed_order.attention(y, y, y, dropout_p=0.1) is NotImplemented


@interpreted
def test_torchs_rules_at_the_edges_bias_ignored_at_beta_0_masked_queries_empty_and_invalid_calls():
    aten = torch.ops.aten
    a, b = torch.randn(10, 7), torch.randn(7, 5)
    a_inf = a.clone()
    a_inf[0, 0] = float("inf")
    poisoned = torch.full((5,), float("nan"))  # GPT-2's baddbmm(torch.empty(...), beta=0) under the NaN fill
    for args, options in (((poisoned, a, b), {"beta": 0}), ((torch.ones(5), a_inf, b), {"alpha": 0})):
        torch.testing.assert_close(fixed_order.call(aten.addmm.default, args, options), torch.addmm(*args, **options))
    q = torch.randn(3, 2, 4, 8)
    mask = torch.ones(3, 1, 4, 4, dtype=torch.bool)
    mask[1, 0, 0] = False  # a query that sees no key: zeros, as torch's math
    torch.testing.assert_close(
        fixed_order.attention(q, q, q, attn_mask=mask), F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    )
    assert fixed_order.attention(q, q, q, attn_mask=mask, is_causal=True) is NotImplemented  # torch raises
    x = torch.randn(4, 3, 5)
    for call in (
        lambda: fixed_order.call(aten.softmax.int, (torch.randn(4, 0), -1), {}),
        lambda: fixed_order.call(aten.bmm.default, (torch.randn(2, 3, 0), torch.randn(2, 0, 4)), {}),
        lambda: fixed_order.softmax(torch.tensor(1.0), 0),
        lambda: fixed_order.softmax(x, 5),
        lambda: fixed_order.mean(x, [1, 1]),
        lambda: fixed_order.mean(x, [-4]),
    ):
        assert call() is NotImplemented  # torch answers (empties) or raises its own error (bad dims)
    with torch.inference_mode(), samebits.batch_invariant(kernels=True):
        assert torch.softmax(torch.randn(4, 0), -1).shape == (4, 0)
        with pytest.raises(IndexError):
            torch.softmax(x, 5)


@interpreted
def test_attention_as_fixed_order_math_with_masks_causality_and_grouped_heads():
    torch.manual_seed(3)
    q = torch.randn(20, 4, 9, 16)
    k, v = torch.randn(20, 2, 9, 16), torch.randn(20, 2, 9, 8)
    mask = torch.rand(20, 1, 9, 9) > 0.3
    mask[..., 0] = True

    def attend(rows_q, rows_k, rows_v, **options):
        return fixed_order.attention(rows_q, rows_k, rows_v, enable_gqa=True, **options)

    for options in ({"is_causal": True}, {"attn_mask": mask}, {"attn_mask": torch.where(mask, 0.0, -1e4)}):
        ours = attend(q, k, v, **options)
        torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **options),
                                   rtol=1e-5, atol=1e-5)  # fmt: skip
        row_options = {name: (o[7:8] if isinstance(o, torch.Tensor) else o) for name, o in options.items()}
        assert torch.equal(attend(q[7:8], k[7:8], v[7:8], **row_options), ours[7:8])


@interpreted
def test_launches_split_past_the_grid_limits_keep_every_bit(monkeypatch):
    """A batch past CUDA's grid z and columns past its y run as several launches of the same
    program (tests/test_gpu_ready.py counts the launches): the limits lowered here to 4 batches
    and 1 column tile a launch, the bits are those of one launch."""
    torch.manual_seed(5)
    a, b, bias = torch.randn(10, 7, 40), torch.randn(10, 40, 150), torch.randn(10, 1, 150)
    whole = fixed_order.bmm(a, b, bias)
    monkeypatch.setattr(fixed_order, "MAX_GRID_Z", 4)
    monkeypatch.setattr(fixed_order, "MAX_GRID_Y", 1)
    assert torch.equal(fixed_order.bmm(a, b, bias), whole)


@interpreted
@pytest.mark.parametrize("std", [1, 2, 4])
def test_float16_attention_has_torchs_error_at_every_logit_scale(std):
    """Scores and weights in float32 (as torch's math backend): with them in float16 the error
    against float64 was 1.7x, 3.3x and 8.1x torch's at logit std 1, 2 and 4."""
    torch.manual_seed(6)
    q = (torch.randn(2, 2, 16, 32) * std).half()
    k, v = torch.randn(2, 2, 16, 32).half(), torch.randn(2, 2, 16, 32).half()
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    torchs = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True).half().double() - exact
    ours = fixed_order.attention(q, k, v, is_causal=True)
    assert ours.dtype == torch.float16
    assert (ours.double() - exact).abs().max() <= 1.5 * torchs.abs().max() + 1e-6


@interpreted
def test_softmax_over_a_middle_dim_is_dense_as_torchs():
    x = torch.randn(4, 10, 7)
    for log in (False, True):
        ours = fixed_order.softmax(x, 1, log=log)
        reference = x.log_softmax(1) if log else x.softmax(1)
        assert ours.stride() == reference.stride() and ours.view(4, 70).shape == (4, 70)
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)


class Block(nn.Module):
    """A decoder block as transformers writes one: RMS norm by ``mean``, projections, causal SDPA,
    and a log-softmax head."""

    def __init__(self, width: int = 32, heads: int = 4, vocab: int = 50) -> None:
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        q, k, v = self.qkv(normed).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2)
        return self.head(x + self.out(mixed)).log_softmax(-1)


@interpreted
def test_the_mode_runs_a_decoder_block_on_the_kernels_row_for_row(monkeypatch):
    torch.manual_seed(4)
    block = Block().eval()
    x = torch.randn(40, 6, 32)
    seen = spy_on_kernels(monkeypatch)
    with torch.inference_mode(), samebits.batch_invariant(kernels=True):
        out = block(x)
        assert places_that_change_bits(block, x, sizes=(1, 3, 40)) == []
    aten = torch.ops.aten
    assert {aten.linear.default, aten.mean.dim, aten.scaled_dot_product_attention.default} <= seen
    assert aten.log_softmax.int in seen
    with torch.inference_mode():
        torch.testing.assert_close(out, block(x), rtol=1e-4, atol=1e-5)


@interpreted
def test_cpu_tensors_keep_the_tiles_by_default_and_float64_falls_back_to_them(monkeypatch):
    layer = nn.Linear(8, 5).eval()
    x = torch.randn(50, 8)

    def refuse(*_):
        raise AssertionError("a CPU tensor reached the kernels without kernels=True")

    monkeypatch.setattr(fixed_order, "call", refuse)
    with torch.inference_mode(), samebits.batch_invariant():
        tiled = layer(x)
    torch.testing.assert_close(tiled, layer(x))
    monkeypatch.undo()
    wide = nn.Linear(8, 5).double().eval()
    with torch.inference_mode(), samebits.batch_invariant(kernels=True):
        assert places_that_change_bits(wide, x.double(), sizes=(1, 3, 50)) == []  # the tiles, not the kernels


def test_asking_for_the_kernels_without_triton_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(fixed_order, "unavailable", lambda: "the fixed-order kernels need Triton (pip install triton)")
    with pytest.raises(UserError, match="need Triton"):
        samebits.batch_invariant(kernels=True)
    with torch.inference_mode(), samebits.batch_invariant(kernels=False):  # the tiles need nothing
        nn.Linear(3, 2)(torch.randn(4, 3))


@pytest.mark.skipif(INTERPRETED, reason=NOT_INTERPRETED)
def test_the_kernels_on_cpu_tensors_without_the_interpreter_are_one_clear_error():
    with pytest.raises(UserError, match="TRITON_INTERPRET=1"):
        with torch.inference_mode(), samebits.batch_invariant(kernels=True):
            nn.Linear(3, 2)(torch.randn(4, 3))


@interpreted
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_transformers_models_from_configs_run_on_the_kernels_row_for_row(name, monkeypatch):
    """GPT-2 (its Conv1D is addmm), BERT with a padding mask, Llama with grouped KV heads and RMS
    norm (mean): every matmul, attention and mean on the kernels, each row its bits alone."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(7)
    small = {"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 16}
    model = {
        "gpt2": lambda: transformers.GPT2Model(
            transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=100, n_positions=16)
        ),
        "bert": lambda: transformers.BertModel(transformers.BertConfig(hidden_size=32, intermediate_size=64, **small)),
        "llama": lambda: transformers.LlamaModel(
            transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_key_value_heads=2, **small)
        ),
    }[name]().eval()
    ids = torch.randint(0, 100, (5, 8))
    mask = torch.ones(5, 8, dtype=torch.long)
    mask[1, 5:] = 0
    seen = spy_on_kernels(monkeypatch)
    with torch.inference_mode(), samebits.batch_invariant(kernels=True):
        batch = model(input_ids=ids, attention_mask=mask)[0]
        for row in range(5):
            assert torch.equal(
                batch[row], model(input_ids=ids[row : row + 1], attention_mask=mask[row : row + 1])[0][0]
            )
    aten = torch.ops.aten
    ran = {"gpt2": {aten.addmm.default}, "bert": {aten.linear.default}, "llama": {aten.linear.default, aten.mean.dim}}
    assert ran[name] | {aten.scaled_dot_product_attention.default} <= seen
    with torch.inference_mode():
        torch.testing.assert_close(batch, model(input_ids=ids, attention_mask=mask)[0], rtol=1e-4, atol=1e-5)
