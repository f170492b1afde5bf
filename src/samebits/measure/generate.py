"""One way to run a transformers-style ``generate`` for measurements: the generation check's
runs, in this process and in a child."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch

from samebits.errors import UserError, first_line, user_code
from samebits.models.inputs import Model


def special_token(model: Model, name: str) -> Any:
    """``pad_token_id``/``eos_token_id`` as ``generate`` will use it: the generation config's,
    else the model config's."""
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        value = getattr(source, name, None)
        if value is not None:
            return value
    return None


def eos_ids(model: Model) -> set[int]:
    eos = special_token(model, "eos_token_id")
    return {eos} if isinstance(eos, int) else set(eos or ())


def pad_id(model: Model) -> int:
    """The token left padding is made of: the model's pad token, else its (smallest) EOS, else 0.
    The generation check and ``Predictor.generate`` pad with the same token."""
    pad = special_token(model, "pad_token_id")
    return pad if isinstance(pad, int) else min(eos_ids(model), default=0)


Side = Literal["left", "right"]


def padding_side(model: Model) -> Side:
    """The side a model's prompts are padded on in a batch: the right for an encoder-decoder (its
    tokenizers pad there; the decoder generates from its own start token), the left for a
    decoder-only model (new tokens follow the prompt's last one)."""
    encoder_decoder = getattr(getattr(model, "config", None), "is_encoder_decoder", False)
    return "right" if encoder_decoder else "left"


def padded(
    prompts: Sequence[torch.Tensor], width: int, pad: int, side: Side = "left"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) ``[len(prompts), width]``: each prompt at the right end with
    ``pad`` (mask 0) before it (``side="left"``), or at the left end with the padding after it."""
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        where = slice(width - len(p), width) if side == "left" else slice(0, len(p))
        ids[i, where] = p
        mask[i, where] = 1
    return ids, mask


@contextlib.contextmanager
def attention(model: Model, implementation: str | None) -> Iterator[None]:
    """The model on attention ``implementation`` (``eager``, ``sdpa``) for the block, put back
    after; ``None`` or the one it has already: unchanged. A one-line error where the model
    cannot switch."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if implementation is None or current in (None, implementation):
        yield
        return
    switch = getattr(model, "set_attn_implementation", None)
    if not callable(switch):
        raise UserError(f"the model cannot switch from {current} to {implementation} attention")
    try:
        switch(implementation)
    except Exception as exc:
        raise UserError(f"the model cannot switch to {implementation} attention ({type(exc).__name__})") from None
    try:
        yield
    finally:
        switch(current)


class GenerateError(UserError):
    """The model's ``generate`` raised (its own error: exit 2, not samebits' bug)."""


@contextlib.contextmanager
def _blamed() -> Iterator[None]:
    try:
        yield
    except UserError:
        raise
    except Exception as exc:
        raise GenerateError(f"the model's generate raised {first_line(exc, with_type=True)}") from exc


def run_generate(
    model: Model,
    ids: torch.Tensor,
    mask: torch.Tensor,
    n: int,
    *,
    pad: int,
    fixed: bool = False,
    seed: int | None = None,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One call of ``model.generate`` on a padded batch: (new tokens ``[rows, steps]``, scores
    ``[rows, steps, vocab]``), on the CPU. ``fixed``: exactly ``n`` steps (no stop at EOS);
    ``seed``: sampled, torch's RNG seeded with it first (the caller's RNG left as it was), else
    greedy."""
    device = next((t.device for t in getattr(model, "parameters", lambda: iter(()))()), torch.device("cpu"))
    with torch.inference_mode(), torch.random.fork_rng(devices=[]), user_code("the model's generate"), _blamed():
        if seed is not None:
            torch.manual_seed(seed)
        out = getattr(model, "generate")(  # noqa: B009 (a transformers model's; supports_generate checked it)
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=n,
            **({"min_new_tokens": n} if fixed else {}),
            do_sample=seed is not None,
            num_beams=1,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=pad,
            use_cache=use_cache,
        )
    width = ids.shape[1]
    return out.sequences[:, width:].cpu(), torch.stack(list(out.scores), dim=1).cpu()


class Generator:
    """``model.generate`` as the generation check runs it: prompts padded into one batch on the
    model's side (``side``, else :func:`padding_side`), ``max_new_tokens`` forced steps, greedy or
    (with ``seed``) sampled from torch's RNG seeded alike before every call; per prompt (tokens,
    scores)."""

    def __init__(self, model: Model, max_new_tokens: int, seed: int | None = None, side: Side | None = None) -> None:
        if not callable(getattr(model, "generate", None)):
            raise UserError("--generate needs a model with a transformers-style generate()")
        self.model, self.n, self.seed = model, max_new_tokens, seed  # seed: sample, seeded alike
        self.pad = pad_id(model)
        self.side: Side = side or padding_side(model)

    def __call__(
        self, prompts: list[torch.Tensor], extra: int = 0, use_cache: bool = True, side: Side | None = None
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Generation of ``prompts`` in one batch, padded to the longest plus ``extra`` (on
        ``side``, else the generator's): per prompt (tokens [n], scores [n, vocab])."""
        width = max(len(p) for p in prompts) + extra
        ids, mask = padded(prompts, width, self.pad, side or self.side)
        tokens, scores = run_generate(
            self.model, ids, mask, self.n, pad=self.pad, fixed=True, seed=self.seed, use_cache=use_cache
        )
        return [(tokens[i].clone(), scores[i].clone().float()) for i in range(len(prompts))]


def step_digests(scores: torch.Tensor) -> list[str]:
    """One digest per step of a prompt's scores ``[steps, vocab]``."""
    from samebits.tensors.digest import RUN_DIGEST, leaf_digest

    return [leaf_digest(scores[k].contiguous(), RUN_DIGEST) for k in range(scores.shape[0])]
