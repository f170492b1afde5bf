"""``samebits.batch_invariant()``: matmuls, linear layers, convolutions and attention on fixed
tiles of rows, so a row's bits do not depend on its batch with no calibration; proved by the
check's batch axis and by rows compared alone and in batches."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import samebits
from conftest import changed_places
from samebits.errors import UserError


def rows_alone_and_in_batches(fn, x: torch.Tensor, sizes=(1, 2, 3, 5, 8, 17, 31, 32, 33, 64)) -> list[int]:
    """The batch sizes at which row 0 gets the bits it gets alone."""
    alone = fn(x[:1])[0]
    return [n for n in sizes if torch.equal(fn(x[:n])[0], alone)]


def test_a_linear_layer_keeps_a_rows_bits_in_every_batch_and_its_values():
    torch.manual_seed(0)
    layer = nn.Linear(256, 257).eval()
    x = torch.randn(64, 256)
    with torch.inference_mode(), samebits.batch_invariant():
        assert rows_alone_and_in_batches(layer, x) == [1, 2, 3, 5, 8, 17, 31, 32, 33, 64]
        tiled = layer(x)
    with torch.inference_mode():
        plain = layer(x)
    torch.testing.assert_close(tiled, plain)  # the same math, on fixed tiles


def test_attention_matmuls_and_sdpa_are_tiled_over_the_batch_with_their_masks():
    torch.manual_seed(1)
    q, k, v = (torch.randn(40, 4, 9, 16) for _ in range(3))
    mask = torch.rand(40, 1, 9, 9) > 0.3
    mask[..., 0] = True  # every query sees at least one key

    def attention(n_rows):
        return torch.nn.functional.scaled_dot_product_attention(
            q[:n_rows], k[:n_rows], v[:n_rows], attn_mask=mask[:n_rows]
        )

    def scores(n_rows):
        return torch.matmul(q[:n_rows], k[:n_rows].transpose(-1, -2))

    with torch.inference_mode(), samebits.batch_invariant(tile=8):
        for fn in (attention, scores):
            alone = fn(1)[0]
            assert all(torch.equal(fn(n)[0], alone) for n in (2, 7, 8, 9, 40))
        tiled = attention(40)
    torch.testing.assert_close(tiled, attention(40))


@pytest.mark.parametrize("spec", ["demo:mlp", "demo:cnn"])
def test_the_checks_batch_axis_is_identical_under_batch_invariant(spec):
    report = samebits.check(spec, axes=("batch", "process"), batch_invariant=True)
    verdicts = {a.axis: a.verdict for a in report.axes}
    assert verdicts == {"batch": "identical", "process": "identical"}, report.axes


def test_a_predictor_with_batch_invariant_verifies_every_size_and_keeps_a_rows_bits(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(96, 257), nn.GELU(), nn.Linear(257, 11)).eval()
    x = torch.randn(45, 96)
    with samebits.Predictor(model, example_inputs=x[:4], cache_dir=tmp_path, batch_invariant=True) as p:
        assert p.invariance.sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # measured: every size, no padding
        batch = p.predict(x)
        assert all(torch.equal(batch[i], p.predict_one(x[i])) for i in (0, 17, 44))
        tiled_key = p.calibration_key
    with samebits.Predictor(model, example_inputs=x[:4], cache_dir=tmp_path) as plain:
        assert plain.calibration_key != tiled_key  # another calibration: the tiles give other bits
    with pytest.raises(UserError, match="use backend='eager', not 'onnxruntime'"):
        samebits.Predictor(model, example_inputs=x[:4], backend="onnxruntime", batch_invariant=True)
    with pytest.raises(UserError, match="a positive tile size"):
        samebits.Predictor(model, example_inputs=x[:4], batch_invariant=0)


def test_a_transformers_model_keeps_a_rows_bits_with_its_padding_mask():
    pytest.importorskip("transformers")
    import real_models

    model, example = real_models.bert()
    ids, mask = example["input_ids"], example["attention_mask"]
    big_ids = torch.cat([ids[1:2], torch.randint(3, 512, (32, 12), generator=torch.Generator().manual_seed(2))])
    big_mask = torch.cat([mask[1:2], torch.ones(32, 12, dtype=mask.dtype)])  # row 0 padded, the others not

    def first_row(n):
        return model(input_ids=big_ids[:n], attention_mask=big_mask[:n]).last_hidden_state[0]

    with torch.inference_mode(), samebits.batch_invariant():
        alone = first_row(1)
        assert [n for n in (2, 5, 33) if torch.equal(first_row(n), alone)] == [2, 5, 33]


def test_a_broadcast_bias_or_mask_is_not_cut_into_rows_even_when_its_size_matches():
    # addmm's 1-D bias of N values, with N equal to the batch: broadcast, not per row
    a, w, bias = torch.randn(7, 5), torch.randn(5, 7), torch.randn(7)
    q = torch.randn(6, 2, 6, 4)
    mask = torch.rand(6, 6) > 0.2  # [L, S] with L equal to the batch: broadcast
    mask[:, 0] = True
    with torch.inference_mode(), samebits.batch_invariant(tile=4):
        torch.testing.assert_close(torch.addmm(bias, a, w), bias + a @ w)
        tiled = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    torch.testing.assert_close(tiled, torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask))


def test_rows_along_any_leading_dim_are_tiled_as_rows_not_by_dim_0():
    """A linear layer over (length, batch, features), as attention's projections see it: the
    batch is dim 1, so tiles of dim 0 would leave the call's shape to the batch."""
    torch.manual_seed(5)
    layer = nn.Linear(96, 80).eval()
    x = torch.randn(70, 7, 96)

    def seq_first(rows):  # rows: (batch, length, features) -> the layer over (length, batch, features)
        return layer(rows.transpose(0, 1)).transpose(0, 1)

    with torch.inference_mode(), samebits.batch_invariant():
        assert changed_places(seq_first, x) == []
        tiled = seq_first(x)
    with torch.inference_mode():
        torch.testing.assert_close(tiled, seq_first(x))


def test_torchs_fused_transformer_and_attention_fast_paths_are_tiled_with_per_row_masks():
    """nn.TransformerEncoderLayer and nn.MultiheadAttention in eval take one fused op each
    (``_transformer_encoder_layer_fwd``, ``_native_multi_head_attention``); a key padding mask
    is per row and is cut with its rows."""
    torch.manual_seed(6)
    encoder = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True, dropout=0.0).eval()
    attention = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(70, 9, 64)
    padding = torch.zeros(70, 9, dtype=torch.bool)
    padding[::3, 6:] = True
    index = torch.arange(70)

    def encode(rows):
        return encoder(x[rows], src_key_padding_mask=padding[rows])

    def attend(rows):
        q = x[rows]
        return attention(q, q, q, key_padding_mask=padding[rows])[0]

    with torch.inference_mode(), samebits.batch_invariant():
        for fn in (encode, attend, lambda rows: encoder(x[rows])):
            assert changed_places(fn, index) == []
        tiled = encode(index), attend(index)
    with torch.inference_mode():
        torch.testing.assert_close(tiled[0], encode(index), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(tiled[1], attend(index), atol=1e-5, rtol=1e-5)


def test_edge_calls_keep_torchs_answers_weights_not_asked_for_biases_per_position_and_empties():
    torch.manual_seed(8)
    attention = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(40, 6, 16)
    weight = torch.randn(4, 8)
    calls = {
        "attention without weights": lambda: attention(x, x, x, need_weights=False)[0],
        "a bias per position": lambda: F.linear(torch.randn(5, 3, 8), weight, torch.randn(3, 4)),
        "a bias per row": lambda: F.linear(torch.randn(40, 8), weight, torch.randn(40, 4)),
        "no positions": lambda: F.linear(torch.randn(2, 0, 8), weight),
        "no rows": lambda: F.linear(torch.randn(0, 8), weight),
    }
    for name, call in calls.items():
        torch.manual_seed(9)
        with torch.inference_mode(), samebits.batch_invariant():
            tiled = call()
        torch.manual_seed(9)
        with torch.inference_mode():
            torch.testing.assert_close(tiled, call(), msg=name, atol=1e-5, rtol=1e-5)
    with torch.inference_mode(), samebits.batch_invariant():
        assert changed_places(lambda rows: attention(rows, rows, rows, need_weights=False)[0], x) == []


class SizeDependentKernels(torch.utils._python_dispatch.TorchDispatchMode):
    """Convolutions and linear layers as some CPUs' kernels compute them: a batch of one on another
    path, and in a batch the rows at odd positions on another micro-kernel lane unless each column
    of the rows is contiguous (both seen on an AMD EPYC with MKL and oneDNN); each other path
    computes in float64 and rounds, so it gives other bits for the same values."""

    OPS = ("convolution", "conv2d", "linear", "addmm")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.overloadpacket.__name__ not in self.OPS:
            return out
        x = args[1] if func.overloadpacket.__name__ == "addmm" else args[0]
        wide = lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a  # noqa: E731
        other = func(*map(wide, args), **kwargs).to(out.dtype)
        if x.shape[0] == 1:
            return other
        if x.stride(0) != 1:  # rows laid out as usual: the odd ones on the other lane
            out = out.clone()
            out[1::2] = other[1::2]
        return out


@pytest.mark.parametrize("spec", ["demo:cnn", "demo:mlp"])
def test_the_batch_axis_stays_identical_when_kernels_depend_on_the_batch_size_and_the_position(spec):
    """Measured once per op and shape, the tiles avoid what this CPU's kernels do by batch size
    and by a row's position in the tile; without them the same kernels diverge."""
    with SizeDependentKernels():
        plain = samebits.check(spec, axes=("batch",))
        tiled = samebits.check(spec, axes=("batch",), batch_invariant=True)
    assert plain.axes[0].verdict == "diverged"  # the simulated kernels have teeth
    assert tiled.axes[0].verdict == "identical", tiled.axes[0].summary
