"""``Predictor.generate``: greedy generation whose tokens and scores for a prompt do not depend on
the other prompts of the call, their number or their order.

What makes a prompt's generation depend on its batch is the shape its forwards run at (batch
rows, padded width) and what its padding looks like. So every prompt runs inside a tile of
exactly ``tile`` rows (filled by repeating a real prompt), left-padded to a bucket width that is
a multiple of ``bucket`` and leaves at least one pad token (an all-ones mask would send some
attention implementations down another kernel path), through the model's own ``generate``, on
eager attention (the CPU SDPA kernel was measured to let a row's bits depend on its neighbours). A
prompt alone runs the same tile shape, so what is left to vary is its row in the tile and its
neighbours: measured, not assumed, on the first call at each width (``check=True``), where the
first and last prompts of the first tile are generated again alone and must agree bit for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from samebits.errors import UserError
from samebits.measure.generate import attention, eos_ids, pad_id, padded, run_generate
from samebits.runtime.invariance import Invariance
from samebits.models.inputs import Model


@dataclasses.dataclass
class Generation:
    """One prompt's generation: the new tokens (up to and including the first EOS, or
    ``max_new_tokens``), and with ``return_scores=True`` the scores ``[steps, vocab]``."""

    tokens: torch.Tensor
    scores: torch.Tensor | None = None


class NotInvariant(UserError):
    """A prompt's generation differed alone and inside a tile: this tile is not batch-invariant here."""


def prompt_list(prompts: object) -> list[torch.Tensor]:
    """1-D token-id tensors from a list of them (or of lists of ints), or from a batch
    ``{"input_ids", "attention_mask"}`` whose padding the mask marks."""
    if isinstance(prompts, dict):
        ids, mask = prompts.get("input_ids"), prompts.get("attention_mask")
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            raise UserError("generate needs input_ids [prompts, length] (and optionally an attention_mask)")
        mask = torch.ones_like(ids) if mask is None else mask
        out = [ids[i][mask[i].bool()] for i in range(ids.shape[0])]
    elif isinstance(prompts, Sequence) and not isinstance(prompts, (str, bytes)):
        out = [p if isinstance(p, torch.Tensor) else torch.tensor(p, dtype=torch.long) for p in prompts]
    else:
        raise UserError("generate takes a list of prompts (1-D token ids) or a batch {input_ids, attention_mask}")
    if not out:
        raise UserError("generate got no prompts")
    for p in out:
        if p.dim() != 1 or len(p) == 0 or p.dtype not in (torch.int32, torch.int64):
            raise UserError("each prompt must be a non-empty 1-D tensor of integer token ids")
    return out


DEFAULT_BUCKET = 32  # Predictor.generate's (and the served /generate's) bucket of prompt widths


def check_fits(model: Model | None, length: int, bucket: int, n: int) -> None:
    """A one-line error where a prompt padded to its bucket plus ``n`` new tokens is longer than
    the model's positions (its config's ``max_position_embeddings`` or ``n_positions``)."""
    config = getattr(model, "config", None)
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if isinstance(limit, int) and width_of(length, bucket) + n > limit:
        raise UserError(
            f"a prompt of {length} tokens runs padded to {width_of(length, bucket)}; with {n} new tokens that is over "
            f"this model's {limit} positions"
        )


def width_of(length: int, bucket: int) -> int:
    """The padded width of a prompt of ``length`` tokens: the next multiple of ``bucket`` that
    leaves at least one pad token."""
    return (length // bucket + 1) * bucket


class Generates(Protocol):
    """What generation reads of a Predictor: its model, verified sizes, lock and generators."""

    model: Model
    invariance: Invariance
    max_batch_size: int
    generators: dict[tuple[int, int, str | None], TileGenerator]
    _lock: Any


def generate_on(
    runner: Generates,
    prompts: object,
    max_new_tokens: int,
    tile: int | None,
    bucket: int,
    return_scores: bool,
    check: bool,
    attention: str | None,
) -> list[Generation]:
    """:meth:`samebits.Predictor.generate` on ``runner``: the arguments checked, the tile chosen
    (the largest verified batch size up to 32), one :class:`TileGenerator` per tile, bucket and
    attention kept on the runner."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise UserError(f"max_new_tokens must be an integer >= 1, not {max_new_tokens!r}")
    if not isinstance(bucket, int) or bucket < 1 or (tile is not None and (not isinstance(tile, int) or tile < 1)):
        raise UserError("tile and bucket must be integers >= 1")
    tile = tile or max([s for s in runner.invariance.sizes if s <= 32] or [min(8, runner.max_batch_size)])
    key = (tile, bucket, attention)
    if key not in runner.generators:
        runner.generators[key] = TileGenerator(runner.model, tile, bucket, runner._lock, attention)
    return runner.generators[key].generate(prompt_list(prompts), max_new_tokens, return_scores, check)


class TileGenerator:
    """Greedy generation of prompts in tiles of ``tile`` rows and bucketed widths."""

    def __init__(self, model: Model, tile: int, bucket: int, lock: Any, attention: str | None = "eager") -> None:
        if not callable(getattr(model, "generate", None)):
            raise UserError("generate needs a model with a transformers-style generate()")
        config = getattr(model, "config", None)
        if getattr(config, "is_encoder_decoder", False):
            raise UserError(
                "Predictor.generate supports decoder-only models (left padding); this one is encoder-decoder"
            )
        self.model, self.tile, self.bucket, self.lock, self.attention = model, tile, bucket, lock, attention
        self.pad, self.eos = pad_id(model), eos_ids(model)  # the generation check pads alike
        self.checked: set[tuple[int, int]] = set()  # (width, max_new_tokens) measured invariant

    def run_tile(self, prompts: list[torch.Tensor], width: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens [tile, n'], scores [tile, n', vocab]) of up to ``tile`` prompts, the rest of
        the tile filled with copies of the last one. On ``self.attention`` for the call (put back
        after): measured on the tiny GPT-2 and Llama here, the CPU SDPA kernel gave 5-17 of 40
        prompts other score bits with other neighbours in the tile, eager attention none."""
        rows = prompts + [prompts[-1]] * (self.tile - len(prompts))
        ids, mask = padded(rows, width, self.pad)
        with self.lock, attention(self.model, self.attention):
            return run_generate(self.model, ids, mask, n, pad=self.pad)

    def generate(self, prompts: list[torch.Tensor], n: int, scores: bool, check: bool) -> list[Generation]:
        for p in prompts:
            check_fits(self.model, len(p), self.bucket, n)
        out: list[Generation | None] = [None] * len(prompts)
        by_width: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            by_width.setdefault(width_of(len(p), self.bucket), []).append(i)
        for width, members in sorted(by_width.items()):
            for start in range(0, len(members), self.tile):
                chunk = members[start : start + self.tile]
                tokens, steps = self.run_tile([prompts[i] for i in chunk], width, n)
                if check and (width, n) not in self.checked:
                    self._check(prompts, chunk, width, n, tokens, steps)
                for row, i in enumerate(chunk):
                    out[i] = self._cut(tokens[row], steps[row], scores)
        return [g for g in out if g is not None]

    def _check(
        self,
        prompts: list[torch.Tensor],
        chunk: list[int],
        width: int,
        n: int,
        tokens: torch.Tensor,
        steps: torch.Tensor,
    ) -> None:
        """The first and last prompts of this tile generated again alone: same bits, or an error."""
        for row in sorted({0, len(chunk) - 1}):
            alone_tokens, alone_steps = self.run_tile([prompts[chunk[row]]], width, n)
            mine, theirs = self._cut(tokens[row], steps[row], True), self._cut(alone_tokens[0], alone_steps[0], True)
            same = torch.equal(mine.tokens, theirs.tokens) and torch.equal(mine.scores, theirs.scores)  # type: ignore[arg-type]
            if not same:
                raise NotInvariant(
                    f"prompt {chunk[row]} ({len(prompts[chunk[row]])} tokens, width {width}) generates other bits "
                    f"alone than at row {row} of a tile of {self.tile}: pass another tile= (or bucket=)"
                )
        self.checked.add((width, n))

    def _cut(self, tokens: torch.Tensor, steps: torch.Tensor, scores: bool) -> Generation:
        """A row's tokens up to its first EOS (included); the steps after it (the tile ran on
        for other rows) are not part of its generation."""
        eos, stop = self.eos, len(tokens)
        for k, t in enumerate(tokens.tolist()):
            if t in eos:
                stop = k + 1
                break
        return Generation(tokens[:stop].clone(), steps[:stop].clone() if scores else None)
