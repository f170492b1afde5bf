"""`samebits check --generate`: where greedy generations part (prompt, step, tokens, margin),
checked against generations computed here with `model.generate` directly; a model built to part
(twin token embeddings) parts under batching, a plain one does not."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import torch

pytest.importorskip("transformers", reason="the generation tests build tiny GPT-2 models from configs (extra 'real')")

import real_models  # noqa: E402
from samebits.checker.generation import check_generation  # noqa: E402
from samebits.errors import UserError  # noqa: E402

from conftest import run_cli  # noqa: E402

HERE = Path(__file__).resolve().parent
N = 16


def greedy(model, ids: torch.Tensor, mask: torch.Tensor, n: int = N, use_cache: bool = True):
    """(new tokens, scores) of ``model.generate`` itself: greedy, ``n`` forced steps."""
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        use_cache=use_cache,
    )
    return out.sequences[:, ids.shape[1] :], torch.stack(out.scores, 1)


def test_a_model_built_to_part_parts_under_batching_where_and_why_it_says():
    report = check_generation(f"{HERE / 'real_models.py'}:gpt2_twins", max_new_tokens=N)
    axes = {a.axis: a for a in report.axes}
    assert axes["repeat"].tokens == "identical" and axes["repeat"].scores == "identical"
    assert axes["batch"].tokens == "diverged" and report.exit_code == 1
    part = axes["batch"].parted[0]
    # recompute here: the prompt alone and inside the left-padded batch of all four
    model, inputs = real_models.gpt2_twins()
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    prompt = ids[part.prompt][mask[part.prompt].bool()][None]
    with torch.inference_mode():
        alone, scores = greedy(model, prompt, torch.ones_like(prompt))
        batched, _ = greedy(model, ids, mask)
    step = next(k for k in range(N) if alone[0, k] != batched[part.prompt, k])
    assert part.step == step and part.position == prompt.shape[1] + step
    assert (part.reference_token, part.other_token) == (int(alone[0, step]), int(batched[part.prompt, step]))
    top = torch.topk(scores[0, step].float(), 2).values
    assert part.margin == pytest.approx(float(top[0] - top[1])) and part.margin < 1e-4  # a hair: the twins
    # where: at that step's forward (generate's prefill, which runs the LM head on the last
    # position only: 1 row alone, 4 batched), the last position's final hidden state (the head's
    # input) is the same alone and batched, and the logits are not: the first module that
    # differs is the head, with identical inputs; otherwise it is earlier in the network
    assert step == 0
    with torch.inference_mode():
        one = model(prompt, attention_mask=torch.ones_like(prompt), output_hidden_states=True, logits_to_keep=1)
        many = model(ids, attention_mask=mask, output_hidden_states=True, logits_to_keep=1)
    same_hidden = torch.equal(one.hidden_states[-1][0, -1], many.hidden_states[-1][part.prompt, -1])
    assert not torch.equal(one.logits[0, -1], many.logits[part.prompt, -1])
    if same_hidden:
        assert (part.module, part.module_type) == ("lm_head", "Linear")
        assert part.module_note == "compared at the prompt's last position"
    else:
        assert part.module not in (None, "lm_head")


def test_a_plain_model_keeps_its_tokens_and_says_where_the_score_bits_move():
    report = check_generation(f"{HERE / 'real_models.py'}:gpt2_prompts", max_new_tokens=8)
    axes = {a.axis: a for a in report.axes}
    assert list(axes) == ["repeat", "batch", "padding", "cache", "attention", "threads", "process"]
    assert all(a.tokens in ("identical", "skipped") for a in report.axes)
    assert axes["repeat"].scores == "identical"
    # the cache and attention verdicts against generate run here: each prompt alone, without the
    # cache, and with eager attention (the model's default is sdpa)
    model, inputs = real_models.gpt2_prompts()
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    prompts = [ids[i][mask[i].bool()][None] for i in range(ids.shape[0])]
    with torch.inference_mode():
        cached = [greedy(model, p, torch.ones_like(p), 8)[1] for p in prompts]
        recomputed = [greedy(model, p, torch.ones_like(p), 8, use_cache=False)[1] for p in prompts]
        model.set_attn_implementation("eager")
        eager = [greedy(model, p, torch.ones_like(p), 8)[1] for p in prompts]
        model.set_attn_implementation("sdpa")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            one_thread = [greedy(model, p, torch.ones_like(p), 8)[1] for p in prompts]
        finally:
            torch.set_num_threads(threads)
    same = lambda a, b: all(torch.equal(x.float(), y.float()) for x, y in zip(a, b))  # noqa: E731
    assert axes["cache"].scores == ("identical" if same(cached, recomputed) else "diverged")
    assert axes["attention"].scores == ("identical" if same(cached, eager) else "diverged")
    if threads == 1:
        assert axes["threads"].scores == "skipped" and "1 thread" in axes["threads"].summary
    else:
        assert axes["threads"].scores == ("identical" if same(cached, one_thread) else "diverged")
    for a in report.axes:
        if a.scores == "diverged":
            assert "scores' bits differ" in a.summary
            assert a.axis == "process" or a.first_score_difference["max_abs"] > 0  # digests only from a child
    with pytest.raises(UserError, match="transformers-style generate"):
        check_generation("demo:mlp", torch.ones(2, 256).long())


def test_the_cli_reports_the_parting_and_exits_1(tmp_path):
    pytest.importorskip("matplotlib", reason="the --html page needs the 'report' extra")
    page = tmp_path / "gen.html"
    result = run_cli(
        "check",
        f"{HERE / 'real_models.py'}:gpt2_twins",
        "--generate",
        str(N),
        "--axes",
        "batch",
        "--html",
        str(page),
        "--json",
        str(tmp_path / "gen.json"),
    )
    assert result.returncode == 1, result.stderr
    html = page.read_text()
    part = json.loads((tmp_path / "gen.json").read_text())["axes"][0]["parted"][0]
    row = "".join(
        f'<td class="num">{part[k]}</td>' for k in ("prompt", "step", "position", "reference_token", "other_token")
    )
    assert "Where generations part" in html and row in html and "<script" not in html
    text = " ".join(result.stdout.split())
    assert "Generations part across batch" in text and "margin" in text
    jsonschema.validate(json.loads((tmp_path / "gen.json").read_text()), schema("check-generate"))
    (cause,) = json.loads((tmp_path / "gen.json").read_text())["causes"]  # the batch axis's, measured
    assert cause["axis"] == "batch" and f"- {cause['code']}: " in text and "Causes (each measured)" in html
    bad = run_cli("check", "demo:mlp", "--generate", "4")
    assert bad.returncode == 2 and "generate" in bad.stderr and "Traceback" not in bad.stderr


def schema(kind: str) -> dict:
    return json.loads(resources.files("samebits").joinpath(f"schemas/{kind}.schema.json").read_text())


@pytest.mark.parametrize("kind", ["check", "check-generate"])
def test_the_schemas_name_every_cause_of_the_registry(kind):
    from samebits.rules.causes import CAUSES

    assert schema(kind)["properties"]["causes"]["items"]["properties"]["code"]["enum"] == list(CAUSES)


def test_an_axis_that_raises_is_an_error_and_the_others_still_report(tmp_path):
    report = check_generation(f"{HERE / 'real_models.py'}:gpt2_cache_only", max_new_tokens=3, axes=("repeat", "cache"))
    verdicts = {a.axis: (a.tokens, a.scores) for a in report.axes}
    assert verdicts == {"repeat": ("identical", "identical"), "cache": ("error", "error")}
    (cache,) = [a for a in report.axes if a.axis == "cache"]
    assert "NotImplementedError: this model decodes with its KV cache only" in cache.summary
    assert report.exit_code == 2 and not report.ok and "could not run" in report.headline()
    out = run_cli(
        "check",
        f"{HERE / 'real_models.py'}:gpt2_cache_only",
        "--generate",
        "3",
        "--axes",
        "repeat,cache",
        "--json",
        str(tmp_path / "gen.json"),
    )
    assert out.returncode == 2, out.stderr
    data = json.loads((tmp_path / "gen.json").read_text())
    assert [a["tokens"] for a in data["axes"]] == ["identical", "error"] and data["exit_code"] == 2
    jsonschema.validate(data, schema("check-generate"))


def test_sampling_with_a_seed_repeats_and_differs_from_greedy_and_from_another_seed(tmp_path):
    from samebits.measure.generate import Generator

    model, inputs = real_models.gpt2_prompts()
    prompt = inputs["input_ids"][0]
    sampled = Generator(model, 8, seed=5)
    tokens = sampled([prompt])[0][0]
    assert torch.equal(sampled([prompt])[0][0], tokens)  # the same seed, the same draws
    assert not torch.equal(Generator(model, 8, seed=6)([prompt])[0][0], tokens)
    assert not torch.equal(Generator(model, 8)([prompt])[0][0], tokens)  # greedy is another path
    before = torch.random.get_rng_state()
    sampled([prompt])
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is left alone
    report = check_generation(
        f"{HERE / 'real_models.py'}:gpt2_prompts", max_new_tokens=6, axes=("repeat",), sample=True, seed=5
    )
    assert report.sampling == {"seed": 5} and report.axes[0].tokens == "identical" and report.exit_code == 0
    from samebits.report.html import render

    assert "sampled (seed 5)" in render(report.to_dict())
    out = tmp_path / "s.json"
    result = run_cli(
        "check",
        f"{HERE / 'real_models.py'}:gpt2_prompts",
        "--generate",
        "4",
        "--sample",
        "--seed",
        "5",
        "--axes",
        "repeat",
        "--json",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["sampling"] == {"seed": 5} and "sampled (seed 5)" in result.stdout
    bad = run_cli("check", "demo:mlp", "--sample")
    assert bad.returncode == 2 and "--sample goes with --generate" in bad.stderr


def test_a_generate_that_raises_is_the_models_error_and_runtime_is_refused():
    spec = f"{HERE / 'check_models.py'}:generate_raises"
    result = run_cli("check", spec, "--generate", "2")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "samebits: error: the model's generate raised IndexError: index 50256 is out of bounds for dimension 0 with size 512"
    )
    refused = run_cli("check", "demo:mlp", "--generate", "2", "--runtime", "predictor")
    assert refused.returncode == 2 and "--generate does not take --runtime" in refused.stderr
