"""``Predictor.generate``: every prompt's tokens and scores are the bits it gets alone, in any
batch and order; plain ``model.generate`` on the same batches is the control that parts."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the generation tests build tiny transformers models from configs")

import real_models  # noqa: E402
import samebits  # noqa: E402
from samebits.measure.generate import Generator  # noqa: E402
from samebits.runtime.generate import NotInvariant, width_of  # noqa: E402

N = 8


def prompts(count=20, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 512, (int(n),), generator=gen) for n in torch.randint(3, 16, (count,), generator=gen)]


def plain(model, batch, n=N):
    """``model.generate`` on a left-padded batch (as a server would run it), ``n`` forced steps:
    per prompt (tokens, scores)."""
    return Generator(model, n)(batch)


def served(predictor, ps, size, order):
    """Every prompt generated in batches of ``size`` taken in ``order``: index -> Generation."""
    out = {}
    for start in range(0, len(ps), size):
        idx = order[start : start + size]
        out.update(zip(idx, predictor.generate([ps[i] for i in idx], N, return_scores=True)))
    return out


@pytest.mark.parametrize("factory", ["gpt2_twins", "llama"])
def test_every_prompt_gets_its_alone_bits_in_any_batch_and_order(tmp_path, factory):
    model, example = getattr(real_models, factory)()
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    ps = prompts()
    alone = [p.generate([q], N, return_scores=True)[0] for q in ps]
    assert all(len(g.tokens) >= 1 and g.scores.shape[0] == len(g.tokens) for g in alone)
    gen = torch.Generator().manual_seed(0)
    for size in (1, 3, 8, 20):
        order = torch.randperm(len(ps), generator=gen).tolist()
        got = served(p, ps, size, order)
        for i in range(len(ps)):
            assert torch.equal(got[i].tokens, alone[i].tokens), (factory, size, i)
            assert torch.equal(got[i].scores, alone[i].scores), (factory, size, i)
    # generation ran on eager attention and put the model's own back
    assert model.config._attn_implementation == "sdpa"
    # the greedy tokens are the model's own: alone, padded to its bucket, on eager attention,
    # model.generate agrees
    q = ps[0]
    ids = torch.zeros((1, width_of(len(q), 32)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    ids[0, -len(q) :], mask[0, -len(q) :] = q, 1
    model.set_attn_implementation("eager")
    with torch.inference_mode():
        direct = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=N, do_sample=False, pad_token_id=0)
    assert torch.equal(direct[0, ids.shape[1] : ids.shape[1] + len(alone[0].tokens)], alone[0].tokens)


def test_plain_generate_on_the_same_batches_parts_the_control(tmp_path):
    model, example = real_models.gpt2_twins()
    twins = [example["input_ids"][i][example["attention_mask"][i].bool()] for i in range(4)]
    ps = prompts(16) + twins  # the twins' prompts are known to part in tokens when batched together
    alone = [plain(model, [q])[0] for q in ps]
    tokens_parted, bits_parted = 0, 0
    for size in (3, 8, 20):
        order = torch.randperm(len(ps), generator=torch.Generator().manual_seed(size)).tolist()
        for start in range(0, len(ps), size):
            idx = order[start : start + size]
            for i, (t, sc) in zip(idx, plain(model, [ps[i] for i in idx])):
                tokens_parted += not torch.equal(t, alone[i][0])
                bits_parted += not torch.equal(sc, alone[i][1])
    together = plain(model, twins)
    assert any(not torch.equal(t, alone[16 + i][0]) for i, (t, _) in enumerate(together))
    assert bits_parted > len(ps)  # most batched prompts get other score bits than alone
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    mine = [p.generate([q], N, return_scores=True)[0] for q in ps]
    for size in (3, 4, 8, 20):
        order = torch.randperm(len(ps), generator=torch.Generator().manual_seed(size)).tolist()
        got = served(p, ps, size, order)
        assert all(torch.equal(got[i].tokens, mine[i].tokens) for i in range(len(ps)))
        assert all(torch.equal(got[i].scores, mine[i].scores) for i in range(len(ps)))
    got = p.generate(twins, N)
    assert all(torch.equal(g.tokens, m.tokens) for g, m in zip(got, mine[16:]))


def test_a_tile_whose_rows_interact_is_refused_not_served(tmp_path):
    model, example = real_models.gpt2_prompts()
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    # from now on each row's logits lean on the batch mean: a row depends on its neighbours
    model.lm_head.register_forward_hook(lambda mod, args, out: out + 1e-3 * out.mean(0, keepdim=True))
    with pytest.raises(NotInvariant, match="generates other bits alone than at row"):
        p.generate(prompts(6), N)
    assert isinstance(NotInvariant("x"), samebits.UserError)  # a clear one-line error, exit 2 on the CLI


def test_a_prompt_stops_at_its_own_eos_whatever_its_neighbours_do(tmp_path):
    model, example = real_models.gpt2_prompts()
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    ps = prompts(6)
    first = p.generate(ps, N)
    model.generation_config.eos_token_id = int(first[2].tokens[3])  # prompt 2's fourth token ends it now
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    again = p.generate(ps, N)
    assert len(again[2].tokens) <= 4 and int(again[2].tokens[-1]) == int(first[2].tokens[3])
    assert [len(g.tokens) for g in p.generate([ps[2]], N)] == [len(again[2].tokens)]


def test_bad_arguments_are_one_line_errors(tmp_path):
    model, example = real_models.gpt2_prompts()
    p = samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path, max_batch_size=8)
    for kwargs, message in [
        ({"prompts": [], "max_new_tokens": 4}, "no prompts"),
        ({"prompts": [torch.tensor([1.5, 2.0])], "max_new_tokens": 4}, "integer token ids"),
        ({"prompts": [torch.tensor([1, 2])], "max_new_tokens": 0}, "max_new_tokens"),
        ({"prompts": [torch.tensor([1, 2])], "max_new_tokens": 2, "tile": 0}, "tile and bucket"),
        ({"prompts": "hello", "max_new_tokens": 2}, "list of prompts"),
        ({"prompts": [torch.ones(40, dtype=torch.long)], "max_new_tokens": 4}, "over this model's 64 positions"),
    ]:
        with pytest.raises(samebits.UserError, match=message):
            p.generate(**kwargs)
    mlp = samebits.Predictor("demo:mlp", cache_dir=tmp_path)
    with pytest.raises(samebits.UserError, match="transformers-style generate"):
        mlp.generate([torch.tensor([1, 2])], 2)
