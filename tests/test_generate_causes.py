"""`check --generate` causes, each by a controlled re-run: checked against the same re-runs done
here by hand (the module re-run alone and its row-count classes; the batch's rows, padding and
shape re-run one at a time with `model.generate`), on GPT-2 and Llama configs and on a GPT-2
whose generate numbers positions over the padding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("transformers", reason="the generation tests build tiny GPT-2 and Llama models from configs")

import real_models  # noqa: E402
from samebits.checker.generation import check_generation  # noqa: E402
from samebits.checker.generation_site import Site, rerun_module  # noqa: E402
from samebits.measure.invariance import format_groups  # noqa: E402

HERE = Path(__file__).resolve().parent


def _by_hand_classes(linear: nn.Linear, row: torch.Tensor, sizes: list[int]) -> str:
    groups: dict[bytes, list[int]] = {}
    with torch.inference_mode():
        for n in sizes:
            y = linear(row.expand(n, -1).contiguous())[n - 1]
            groups.setdefault(y.numpy().tobytes(), []).append(n)
    return format_groups(list(groups.values()), sizes)


def test_a_module_re_run_alone_gives_its_row_count_classes_and_says_whether_shape_decides():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512)).eval()
    x = torch.randn(12, 1, 64)
    alone, batch = x[3:4], x[:12]  # the row of interest: row 3 of 12, alone in a 1-row call
    site = Site("batch", 0, 0, (lambda: model(alone), 1, 0), (lambda: model(batch), 12, 3), "0", "Linear")
    site.inputs_identical = True
    result = rerun_module(model, site)
    with torch.inference_mode():
        differs = not torch.equal(model(alone)[0, -1], model(batch)[3, -1])
    assert result.reproduced is differs
    if not differs:
        pytest.skip("a 64->512 Linear gives a row the same bits at 1 and 12 rows on this machine")
    assert result.rows == (1, 12)
    sizes = [1, 2, 3, 4, 5, 6, 7, 8, 12]
    assert result.classes == _by_hand_classes(model[0], x[3, 0][None], sizes)
    assert result.copies_reproduce is True  # a Linear's row depends on the call's shape, not on the other rows
    assert "reproduces the difference" in result.text("0")
    # a module that mixes rows: copies of the row do not give the two runs' bits, and it says so
    mixing = nn.Sequential(Mix()).eval()
    site = Site("batch", 0, 0, (lambda: mixing(alone), 1, 0), (lambda: mixing(batch), 12, 3), "0", "Mix")
    site.inputs_identical = True
    mixed = rerun_module(mixing, site)
    assert mixed.reproduced and mixed.copies_reproduce is False and "the other rows' values matter" in mixed.text("0")


class Mix(nn.Module):
    """Each row plus the mean of all rows: the rows' outputs depend on each other."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + x.mean(dim=0, keepdim=True)


def _greedy(model, prompts, extra=0, n=8):
    from samebits.measure.generate import Generator

    return Generator(model, n)(prompts, extra=extra)


def _same(a, b) -> bool:
    return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("name", ["gpt2_twins", "llama"])
def test_the_batch_cause_states_what_re_running_one_factor_at_a_time_shows(name):
    report = check_generation(f"{HERE / 'real_models.py'}:{name}", max_new_tokens=8, axes=("batch",))
    (axis,) = report.axes
    assert axis.scores == "diverged"
    (cause,) = report.causes
    assert cause.axis == "batch"
    # the same re-runs by hand: the prompt alone padded to the batch's width, copies of it
    # unpadded, copies at the batch's width against the prompt inside the batch
    model, inputs = getattr(real_models, name)()
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    prompts = [ids[i][mask[i].bool()] for i in range(ids.shape[0])]
    where = axis.parted[0].prompt if axis.parted else axis.first_score_difference["prompt"]
    p, width, rows = prompts[where], ids.shape[1], len(prompts)
    alone = _greedy(model, [p])[0]
    by_padding = not _same(_greedy(model, [p], extra=width - len(p))[0], alone)
    by_rows = not _same(_greedy(model, [p] * rows)[0], alone)
    shape_decides = _same(_greedy(model, [p] * rows, extra=width - len(p))[0], _greedy(model, prompts)[where])
    said = cause.evidence
    assert f"left-padded to the batch's width ({width}): {'differs' if by_padding else 'keeps'}" in said
    assert f"{rows} copies of it, unpadded: {'differs' if by_rows else 'keeps'}" in said
    assert ("give exactly its bits inside the batch" in said) is shape_decides
    assert cause.verified is (True if shape_decides else None)
    assert cause.code == ("batch-size" if by_rows else "padding" if by_padding else "batch-composition")
    assert ("the number of rows" in cause.summary) is by_rows
    if name == "llama":  # an unpadded prompt inside a padded batch: the layers get a mask only there
        assert not shape_decides and "attention mask: bool" in said and "none among the copies" in said


def test_padding_that_shifts_positions_is_told_from_padding_that_changes_shapes():
    shifted = check_generation(f"{HERE / 'real_models.py'}:gpt2_padded_positions", max_new_tokens=4, axes=("padding",))
    (cause,) = shifted.causes
    assert "shifts the prompt's positions" in cause.summary and "position_ids" in cause.fix
    assert "position ids shift with the padding" in cause.evidence
    plain = check_generation(f"{HERE / 'real_models.py'}:gpt2_prompts", max_new_tokens=4, axes=("padding",))
    if plain.axes[0].scores == "identical":
        assert plain.causes == []
        return
    (cause,) = plain.causes
    assert "position ids stay the same" in cause.evidence and "fixed width bucket" in cause.fix


def _bart_scores(model, ids, mask, n=4):
    """BART's greedy scores by hand: transformers' generate on ids padded by the test."""
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids[None],
            attention_mask=mask[None],
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            num_beams=1,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=1,
        )
    return torch.stack(list(out.scores), dim=1)[0]


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    diff = (a - b).abs()
    return float(diff[torch.isfinite(diff)].max())


def test_bart_left_padding_is_blamed_on_position_numbering_with_the_right_padding_re_run():
    """BART numbers positions from the sequence's start, padding included: 3 left pads move the
    scores by about 1e-3, 3 right pads by about 1e-7 (by hand, below). Left-padded, the cause says
    position numbering with the right-side re-run as evidence; by default an encoder-decoder is
    padded on the right, the report says so, and the left side's gap is the evidence to keep it."""
    model, inputs = real_models.bart()
    p = inputs["input_ids"][0]
    pads, ones, zeros = torch.full((3,), 1), torch.ones(len(p), dtype=torch.long), torch.zeros(3, dtype=torch.long)
    alone = _bart_scores(model, p, ones)
    left = _gap(_bart_scores(model, torch.cat([pads, p]), torch.cat([zeros, ones])), alone)
    right_scores = _bart_scores(model, torch.cat([p, pads]), torch.cat([ones, zeros]))
    right = None if torch.equal(right_scores, alone) else _gap(right_scores, alone)
    assert left > 1e-5 and (right is None or right * 10 <= left), (left, right)
    spec = f"{HERE / 'real_models.py'}:bart"

    report = check_generation(spec, max_new_tokens=4, axes=("padding",), padding_side="left")
    assert report.padding_side == "left"
    (cause,) = report.causes
    assert "numbers the padding positions" in cause.summary and "padding_side = 'right'" in cause.fix
    assert f"3 pad tokens on the left: scores differ by up to {left:.2g}" in cause.evidence
    right_text = "keeps the reference's bits" if right is None else f"scores differ by up to {right:.2g}"
    assert f"re-run with them on the right: {right_text}" in cause.evidence

    default = check_generation(spec, max_new_tokens=4, axes=("padding",))
    assert default.padding_side == "right" and "on the right (encoder-decoder)" in default.axes[0].summary
    if default.causes:  # right padding may keep every bit
        (cause,) = default.causes
        assert "numbers the padding positions" not in cause.summary
        assert f"re-run with them on the left: scores differ by up to {left:.2g}" in cause.evidence
        assert "keep padding on the right" in cause.evidence


def test_audio_encoder_decoders_are_refused_with_the_reason():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from samebits.errors import UserError

    config = WhisperConfig(
        vocab_size=128,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=8,
        max_source_positions=8,
        max_target_positions=16,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=3,
    )
    model = WhisperForConditionalGeneration(config).eval()
    with pytest.raises(UserError, match=r"takes input_features \(audio\).*do not apply"):
        check_generation(model, {"input_features": torch.zeros(1, 8, 16)}, max_new_tokens=2)


def test_the_cache_cause_re_runs_the_first_module_at_the_two_paths_row_counts():
    report = check_generation(f"{HERE / 'real_models.py'}:llama", max_new_tokens=4, axes=("cache", "repeat"))
    axes = {a.axis: a for a in report.axes}
    assert axes["repeat"].scores == "identical" and [c.axis for c in report.causes] == ["cache"]
    (cause,) = report.causes
    moved = axes["cache"].first_score_difference
    length = report.prompts[moved["prompt"]]
    assert moved["step"] >= 1  # the prefill is the same forward on both paths
    if "row last among n copies" in cause.evidence:  # a row-wise module with identical inputs found first
        # with the cache a decode step runs 1 row; recomputing, the whole sequence so far
        assert f"(1 row in the reference call, {length + moved['step']} rows in the other)" in cause.evidence
    assert cause.code == "cache-path" and "use_cache=True" in cause.fix
