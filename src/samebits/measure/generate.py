"""One way to run a transformers-style ``generate`` for measurements: the generation check's
runs, in this process and in a child."""

from __future__ import annotations

from typing import Any

import torch

from samebits.errors import UserError


class Generator:
    """``model.generate`` as the generation check runs it: prompts left-padded into one batch,
    ``max_new_tokens`` forced steps, greedy or (with ``seed``) sampled from torch's RNG seeded
    alike before every call; per prompt (tokens, scores)."""

    def __init__(self, model: Any, max_new_tokens: int, seed: int | None = None) -> None:
        if not callable(getattr(model, "generate", None)):
            raise UserError("--generate needs a model with a transformers-style generate()")
        self.model, self.n, self.seed = model, max_new_tokens, seed  # seed: sample, seeded alike
        config = getattr(model, "config", None)
        pad = getattr(config, "pad_token_id", None)
        eos = getattr(config, "eos_token_id", None)
        self.pad = pad if pad is not None else (eos if isinstance(eos, int) else 0)

    def __call__(
        self, prompts: list[torch.Tensor], extra: int = 0, use_cache: bool = True
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Greedy generation of ``prompts`` in one batch, left-padded to the longest plus ``extra``:
        per prompt (tokens [n], scores [n, vocab])."""
        width = max(len(p) for p in prompts) + extra
        ids = torch.full((len(prompts), width), self.pad, dtype=prompts[0].dtype)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = p
            mask[i, width - len(p) :] = 1
        with torch.inference_mode(), torch.random.fork_rng(devices=[]):  # the caller's RNG left as it was
            if self.seed is not None:
                torch.manual_seed(self.seed)
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=self.n,
                min_new_tokens=self.n,
                do_sample=self.seed is not None,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.pad,
                use_cache=use_cache,
            )
        tokens = out.sequences[:, width:]
        scores = torch.stack(list(out.scores), dim=1).float()
        return [(tokens[i].clone(), scores[i].clone()) for i in range(len(prompts))]


def step_digests(scores: torch.Tensor) -> list[str]:
    """One digest per step of a prompt's scores ``[steps, vocab]``."""
    from samebits.tensors.digest import RUN_DIGEST, leaf_digest

    return [leaf_digest(scores[k].contiguous(), RUN_DIGEST) for k in range(scores.shape[0])]
