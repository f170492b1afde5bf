"""The layout axis and `verify --layout`: the same weights and inputs re-laid in memory, checked
against the same re-laying done here by hand; a safetensors round trip; record from a model built
in memory, verify with one loaded from a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import samebits
from samebits.tensors.layout import is_aligned

from conftest import run_cli

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import layout_models  # noqa: E402

MODELS = HERE / "layout_models.py"
pytest.importorskip("safetensors", reason="the round trip writes a safetensors file")


def _at_40(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values starting 40 bytes past a 64-byte boundary, built by hand."""
    buffer = torch.empty(t.numel() + 64, dtype=t.dtype)
    start = (-buffer.data_ptr() % 64) // t.element_size() + 40 // t.element_size()
    out = buffer[start : start + t.numel()].view(t.shape)
    out.copy_(t)
    assert out.data_ptr() % 64 == 40
    return out


def _transposed(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t() if t.dim() == 2 else t


def _by_hand(model: torch.nn.Module, x: torch.Tensor) -> dict[str, bool]:
    """For each layout, whether the output keeps the model's bits, re-laid here by hand."""
    with torch.inference_mode():
        reference = model(x)
    kept = {}
    for name, relay in (("aligned", torch.clone), ("offset", _at_40), ("strided", _transposed)):
        params = list(model.parameters())
        before = [p.data for p in params]
        with torch.no_grad():
            for p in params:
                p.data = relay(p.data)
        with torch.inference_mode():
            kept[f"parameters {name}"] = torch.equal(model(x), reference)
        for p, data in zip(params, before):
            p.data = data
    with torch.inference_mode():
        kept["inputs offset"] = torch.equal(model(_at_40(x)), reference)
        kept["inputs strided"] = torch.equal(model(_transposed(x)), reference)
    return kept


def test_the_layout_axis_agrees_with_the_same_re_laying_by_hand():
    model, x = layout_models.in_memory()
    kept = _by_hand(model, x)
    report = samebits.check(model, x, axes=("layout",))
    (axis,) = report.axes
    verdicts = {t.name: t.verdict for t in axis.details.layouts}
    assert verdicts == {name: "identical" if same else "diverged" for name, same in kept.items()}
    assert axis.details.model_as_given == "all 4 parameters and buffers contiguous and aligned"
    # its parameters are contiguous: transposed ones are a layout it never is (sensitivity only)
    kept["parameters strided"] = True
    if all(kept.values()):  # none found: it says so, with what it tried
        assert report.ok and axis.summary.startswith("4/4 layouts give the model's bits (parameters aligned")
        return
    (cause,) = report.causes
    assert cause.code == "memory-layout" and report.exit_code == 1
    differ = [name for name, same in kept.items() if not same]
    assert all(name in cause.summary for name in differ)
    if any(name.startswith("parameters") for name in differ):
        assert cause.verified is True and "samebits.align_parameters(model)" in cause.fix
        assert axis.origin is not None and axis.origin.module == "0"  # the first Linear
    else:
        assert "contiguous inputs" in cause.fix


def test_a_safetensors_round_trip_sits_at_an_offset_and_align_parameters_gives_the_in_memory_bits():
    built, x = layout_models.in_memory()
    loaded, _ = layout_models.from_safetensors()
    assert all(p.data_ptr() % 64 == 40 for p in loaded.parameters())  # where load_file put them
    report = samebits.check(loaded, x, axes=("layout",))
    (axis,) = report.axes
    assert axis.details.model_as_given.startswith("4 of 4 parameters and buffers not contiguous and aligned")
    with torch.inference_mode():
        same_as_built = torch.equal(loaded(x), built(x))
    # re-laid in fresh aligned storage, the loaded model is laid out as the built one
    assert {t.name: t.verdict for t in axis.details.layouts}["parameters aligned"] == (
        "identical" if same_as_built else "diverged"
    )
    assert samebits.align_parameters(loaded) is loaded
    assert all(is_aligned(p) for p in loaded.parameters())
    with torch.inference_mode():
        assert torch.equal(loaded(x), built(x))


def test_record_in_memory_then_verify_a_model_loaded_from_a_file(tmp_path):
    golden = tmp_path / "mlp.safetensors"
    recorded = run_cli("record", f"{MODELS}:in_memory", "--output", str(golden))
    assert recorded.returncode == 0, recorded.stderr
    out = tmp_path / "v.json"
    result = run_cli("verify", str(golden), f"{MODELS}:from_safetensors", "--layout", "--exact", "--json", str(out))
    data = json.loads(out.read_text())
    layouts = {t["name"]: t["verdict"] for t in data["layouts"]}
    assert set(layouts) == {
        "parameters aligned",
        "parameters offset",
        "parameters strided",
        "inputs offset",
        "inputs strided",
    }
    # fresh aligned storage is the built model's layout; 40 bytes past a boundary is the loaded one's
    assert layouts["parameters aligned"] == "identical"
    assert layouts["parameters offset"] == data["verdict"]
    found = data["verdict"] == "diverged" or "diverged" in layouts.values()
    assert result.returncode == data["exit_code"] == (1 if found else 0), result.stderr
    assert "re-laid in memory:" in result.stdout and "parameters offset" in result.stdout


def test_a_layout_the_model_is_never_in_is_sensitivity_not_a_verdict():
    """Transposed parameters change this model's bits, but its parameters are all contiguous: the
    axis stays identical and says so (exit 0); given a transposed weight, the layout counts."""
    model, x = layout_models.stride_sensitive()
    report = samebits.check(model, x, axes=("layout",))
    (axis,) = report.axes
    tried = {t.name: t for t in axis.details.layouts}
    assert tried["parameters strided"].verdict == "diverged" and not tried["parameters strided"].counts
    assert axis.verdict == "identical" and report.exit_code == 0 and not report.causes
    assert "parameters strided differ too, which this model never is" in axis.summary
    model, x = layout_models.stride_sensitive(transposed=True)
    report = samebits.check(model, x, axes=("layout",))
    assert report.axes[0].verdict == "diverged" and [c.code for c in report.causes] == ["memory-layout"]
