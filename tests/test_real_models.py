"""Every capability on models people bring (tests/real_models.py): transformers GPT-2 (with and
without its cache, a decode step), BERT with padding, T5, ViT, and a torchvision-style two-stage
detector. Verdicts are the ones measured on this project's machine (torch 2.13 CPU)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the real-model suite needs transformers: pip install 'samebits[real]'")

import samebits  # noqa: E402
from samebits.runtime.backends import BackendUnavailable  # noqa: E402

from conftest import assert_record_then_verify_identical, run_cli  # noqa: E402

HERE = Path(__file__).resolve().parent
FACTORIES = HERE / "real_models.py"
sys.path.insert(0, str(HERE))
import real_models  # noqa: E402

TRANSFORMERS = ["gpt2", "gpt2_no_cache", "gpt2_decode", "bert", "t5", "vit"]


def spec(name: str) -> str:
    return f"{FACTORIES}:{name}"


@pytest.fixture(scope="module")
def reports():
    """One full check (all default axes) per model, shared by the tests below."""
    cache: dict[str, samebits.checker.CheckReport] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = samebits.check(spec(name))
        return cache[name]

    return get


def verdicts(report) -> dict[str, str]:
    return {a.axis: a.verdict for a in report.axes}


@pytest.mark.parametrize("name", [*TRANSFORMERS, "detector"])
def test_every_axis_but_batch_is_identical(reports, name):
    # Measured: repeat, seed, state, process and threads identical for each of these models.
    report = reports(name)
    found = verdicts(report)
    kernels = ("batch", "layout")  # these depend on the CPU's GEMM kernels: below
    assert set(found) == {"repeat", "seed", "state", "process", "threads", *kernels}
    assert {a: v for a, v in found.items() if a not in kernels} == dict.fromkeys(
        ["repeat", "seed", "state", "process", "threads"], "identical"
    )


# The batch axis depends on the CPU's GEMM kernels: measured on a CPU of the baseline's kind
# (tests/baselines/check.json: Intel AVX512, torch 2.13; an AMD AVX512 machine groups otherwise).
BATCH_HERE = {
    "gpt2": ("identical", None, None),
    "gpt2_no_cache": ("identical", None, None),
    "gpt2_decode": ("diverged", "{1} {2} {3..32}", "transformer.h.0.attn.c_attn"),
    "bert": ("diverged", "{1} {2} {3..32}", "pooler.dense"),
    "t5": ("identical", None, None),
    "vit": ("diverged", "{1} {2..32}", "pooler.dense"),
    "detector": ("identical", None, None),
}


def first_row_differs_by_hand(name: str) -> bool | None:
    """Measured here without the check: whether the example's first sample gets other bits alone
    than first in batches of itself repeated (``None`` for inputs that are not a dict of tensors)."""
    model, inputs = getattr(real_models, name)()
    if not isinstance(inputs, dict):
        return None

    def batch(n: int) -> dict:
        return {
            k: v[:1].repeat(n, *[1] * (v.dim() - 1)) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()
        }

    with torch.inference_mode():
        alone = model(**batch(1))[0][0]
        return any(not torch.equal(model(**batch(n))[0][0], alone) for n in (2, 3, 8, 32))


@pytest.mark.parametrize("name", list(BATCH_HERE))
def test_batch_verdict_and_origin_as_measured(reports, name):
    """On every CPU: what a hand-made batch shows differs, the check finds (the kernels' batch
    classes are this CPU's); on the baseline's CPU kind also the very groups and first module."""
    from test_check_baseline import same_cpu_kind

    batch = next(a for a in reports(name).axes if a.axis == "batch")
    if first_row_differs_by_hand(name):
        assert batch.verdict == "diverged", batch.summary
    if batch.verdict == "diverged":
        assert batch.origin.module in {n or "<model>" for n, _ in getattr(real_models, name)()[0].named_modules()}
    if same_cpu_kind():
        verdict, groups, origin = BATCH_HERE[name]
        assert batch.verdict == verdict, batch.summary
        if groups:
            assert batch.details.groups_text == groups and batch.origin.module == origin


@pytest.mark.parametrize("name", [*TRANSFORMERS, "detector"])
def test_check_finds_what_the_baseline_found(reports, name):
    # tests/baselines/check.json: what an earlier check found on the same model (see test_check_baseline)
    from test_check_baseline import expected, found

    assert found(reports(name)) == expected(f"real_models:{name}")


def test_a_difference_in_the_cache_is_named_by_its_layer():
    model, inputs = real_models.gpt2()
    with torch.no_grad():
        out, again = model(**inputs), model(**inputs)
    again.cache.layers[1].values[2, 0, 3, 0] += 1e-3
    result = samebits.compare(out, again)
    assert [c.path for c in result.items if not c.identical] == [".cache[1].values"]


@pytest.mark.parametrize("name", ["gpt2_decode", "bert"])
def test_runtime_predictor_makes_the_batch_axis_identical(name):
    report = samebits.check(spec(name), axes=("batch",), runtime="predictor")
    assert verdicts(report) == {"batch": "identical"}


def test_a_detector_left_in_training_mode_is_diagnosed_before_its_forward_fails():
    out = run_cli("check", spec("detector_train_mode"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert (
        "targets should not be none when in training mode" in out.stderr
        and "call model.eval() before inference" in out.stderr
    )
    doc = samebits.doctor(spec("detector_train_mode"), backends=())
    assert [f.code for f in doc.findings] == ["SB151"] and "<model> (TwoStageDetector)" in doc.findings[0].message
    assert doc.probes[-1].probe == "first forward" and doc.probes[-1].status == "error"


def test_images_and_targets_are_batched_row_by_row():
    report = samebits.check(spec("detector_with_targets"), axes=("repeat", "batch"))
    found = {a.axis: a for a in report.axes}
    # Training mode: dropout makes repeats differ; the losses are per batch, so rows cannot be split.
    assert found["repeat"].verdict == "diverged" and any("training mode" in c.summary for c in report.causes)
    assert found["batch"].verdict == "skipped" and "'.loss_box_reg' has shape ()" in found["batch"].reason


# -- the Predictor -----------------------------------------------------------------------------
def test_predictor_keeps_model_output_and_exactly_the_real_rows_of_the_cache(tmp_path):
    model, example = real_models.gpt2()
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path) as p:
        ids = real_models._ids((300, 16), 512, seed=5)
        out = p.predict({"input_ids": ids[:5]})
        assert type(out).__name__ == "CausalLMOutputWithCrossAttentions" and out.logits.shape == (5, 16, 512)
        assert type(out.cache).__name__ == "DynamicCache" and [layer.keys.shape[0] for layer in out.cache.layers] == [
            5,
            5,
        ]
        big = p.predict({"input_ids": ids})
        assert big.cache.layers[1].values.shape[0] == 300 and big.logits.shape[0] == 300
        one = p.predict_one({"input_ids": ids[2]})
        assert one.logits.shape == (16, 512) and one.cache.layers[0].keys.shape[0] == 1
        assert torch.equal(one.logits, out.logits[2])
        mapped = list(p.map([{"input_ids": ids[i]} for i in range(5)], batch_size=2))
        assert len(mapped) == 5 and all(torch.equal(m.logits, out.logits[i]) for i, m in enumerate(mapped))


@dataclasses.dataclass
class Pair:
    logits: torch.Tensor
    features: torch.Tensor


class PairModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> Pair:
        return Pair(self.fc(x), x * 2)


def test_predictor_returns_every_row_of_a_dataclass_output(tmp_path):
    x = torch.randn(5, 4)
    with samebits.Predictor(PairModel(), example_inputs=x, invariant=False, max_batch_size=2, cache_dir=tmp_path) as p:
        out = p.predict(x)
    assert isinstance(out, Pair) and out.logits.shape == (5, 3) and torch.equal(out.features, x * 2)


def test_predictor_batches_a_list_of_images(tmp_path):
    model, (images,) = real_models.detector()
    extra = real_models._images(3, 32)
    with samebits.Predictor(model, example_inputs=(images,), cache_dir=tmp_path) as p:
        out = p.predict((extra,))
        one = p.predict_one((extra[1],))
    assert len(out) == 3 and set(out[1]) == {"boxes", "labels", "scores"}
    assert torch.equal(one["boxes"], out[1]["boxes"]) and one["boxes"].shape[1] == 4


def test_onnxruntime_takes_keywords_and_keeps_the_output_type(tmp_path):
    pytest.importorskip("onnxruntime")
    model, example = real_models.bert()
    with samebits.Predictor(model, example_inputs=example, backend="onnxruntime", cache_dir=tmp_path) as p:
        out = p.predict({k: v[:3] for k, v in example.items()})
        assert type(out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions" and out.last_hidden_state.shape == (
            3,
            12,
            64,
        )
        assert p.validation.max_abs < 1e-4 and p.invariance.sizes  # measured: ~1e-6, invariant at every size 1..256
        assert list(p.artifacts) and all(a.path.endswith(".ort.onnx") for a in p.artifacts.values())


def test_a_model_that_does_not_export_says_why(tmp_path):
    pytest.importorskip("onnxruntime")
    model, example = real_models.gpt2()
    with pytest.raises(BackendUnavailable, match=r"does not export to ONNX: .*DynamicCache"):
        samebits.Predictor(model, example_inputs=example, backend="onnxruntime", cache_dir=tmp_path)


# -- goldens and the plugin --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2", "t5", "detector"])
def test_record_then_verify_in_a_new_process(tmp_path, name):
    assert_record_then_verify_identical(spec(name), tmp_path)


def test_doctor_finds_grad_on_a_transformers_model():
    report = samebits.doctor(spec("gpt2"), backends=(), iterations=5)
    codes = {f.code for f in report.findings}
    # Measured: the model runs with grad on (outputs carry grad_fn); it is in eval mode.
    assert "SB351" in codes and "SB151" not in codes
    assert (
        next(p for p in report.probes if p.probe == "training mode").summary
        == "0 training-sensitive module(s) in training mode"
    )


pytest_plugins = ["pytester"]


def test_pytest_plugin_pins_a_gpt2(pytester):
    pytester.makepyfile(
        test_gpt2=f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import real_models

def test_gpt2(samebits_golden):
    model, inputs = real_models.gpt2()
    samebits_golden.check(model, inputs, name="gpt2")
"""
    )
    pytester.runpytest("--samebits-update").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)


def test_clip_through_the_predictor_keeps_its_b_by_b_logits_and_check_names_coupled_rows(tmp_path):
    model, example = real_models.clip()
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path) as p:
        assert p.plan.scheme == "whole" and "logits_per_image" in p.plan.notes[0]
        for n in (2, 4):
            batch = {k: v[:n] for k, v in example.items()}
            got, want = p.predict(batch), model(**batch)
            assert got.logits_per_image.shape == (n, n)
            assert torch.equal(got.logits_per_image, want.logits_per_image)
            assert torch.equal(got.text_embeds, want.text_embeds)
    report = samebits.check(spec("clip"), axes=("batch",))
    assert [c.code for c in report.causes] == ["rows-coupled"]


SUITE = [*TRANSFORMERS, "detector", "clip", "llama", "bart", "mamba", "qwen2_moe"]


@pytest.mark.parametrize("name", SUITE)
def test_the_predictor_returns_the_models_own_structure_shapes_and_types(name, tmp_path):
    """Whatever the plan (tiles, whole batches), the output through the Predictor has the model's
    own type, paths, shapes and dtypes for the batch given."""
    from samebits.tensors import flatten

    model, example = getattr(real_models, name)()
    batch = example if isinstance(example, (dict, tuple)) else (example,)
    with torch.inference_mode():
        want = model(**batch) if isinstance(batch, dict) else model(*batch)
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=4) as p:
        got = p.predict(batch if isinstance(batch, dict) else batch[0] if len(batch) == 1 else batch)
    assert type(got) is type(want)

    def layout(out):
        return {
            k: (tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else type(v) for k, v in flatten(out).items()
        }

    assert layout(got) == layout(want)


@pytest.mark.parametrize("name", ["mamba", "qwen2_moe"])
def test_state_space_and_mixture_of_experts_models_keep_every_rows_bits_through_the_predictor(name, tmp_path):
    """Mamba's states in dicts and a MoE's routed experts: every leaf of the output cut to the
    batch's rows, each row the bits it has alone, and the check lists the cache's states."""
    from samebits.tensors import flatten

    model, example = getattr(real_models, name)()
    ids = real_models._ids((10, 8), 128, seed=40)
    extra = {k: v for k, v in example.items() if k != "input_ids"}
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=4) as p:
        out = p.predict({"input_ids": ids, **extra})
        assert all(v.shape[0] == 10 for v in flatten(out).values() if isinstance(v, torch.Tensor))
        for i in (0, 3, 9):
            alone = p.predict_one({"input_ids": ids[i], **extra})
            assert torch.equal(out.logits[i], alone.logits)
    if name == "mamba":  # the check compares the states too (they differ with the batch on some CPUs)
        (batch,) = samebits.check(spec(name), axes=("batch",)).axes
        if batch.verdict == "diverged":
            assert any(o.path.startswith(".cache[") for o in batch.difference.outputs), batch.difference.outputs
