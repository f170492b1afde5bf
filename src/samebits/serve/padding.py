"""Variable-length inputs for ``samebits serve --pad NAME:DIM[=VALUE] --pad-lengths 16,32,...``:
a request's padded inputs (``input_ids``, ``attention_mask``) may have any length up to the
largest bucket along DIM; each is padded with VALUE to the smallest bucket that holds it, batched
only with requests of the same bucket, run through that bucket's own Predictor (calibrated at
that length), and the outputs that carry the length (``last_hidden_state``, ``logits``) are cut
back to it. A sample's answer is the one it gets padded to its bucket and run alone, whatever the
load: the bucket depends on its own length only, never on its neighbours'. (It is not the
unpadded forward's: padding changes kernel shapes; a model that masks the padding means the same.)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs

if TYPE_CHECKING:
    from samebits.runtime.predictor import Predictor


@dataclasses.dataclass(frozen=True)
class PadSpec:
    name: str
    dim: int  # counted with the batch dim (input_ids [N, L]: 1)
    value: float = 0.0


def parse_pad(text: str) -> PadSpec:
    """``input_ids:1`` or ``attention_mask:1=0``."""
    head, _, value = text.partition("=")
    name, _, dim = head.rpartition(":")
    try:
        spec = PadSpec(name, int(dim), float(value) if value else 0.0)
    except ValueError:
        raise UserError(f"--pad takes NAME:DIM[=VALUE] (input_ids:1), not '{text}'") from None
    if not name or spec.dim < 1:
        raise UserError(f"--pad takes NAME:DIM[=VALUE] with DIM >= 1 (dim 0 is the batch), not '{text}'")
    return spec


def _resize(t: torch.Tensor, dim: int, length: int, value: float) -> torch.Tensor:
    """``t`` cut or padded with ``value`` to ``length`` along ``dim``."""
    have = t.shape[dim]
    if have >= length:
        return t.narrow(dim, 0, length)
    shape = list(t.shape)
    shape[dim] = length - have
    return torch.cat([t, torch.full(shape, value, dtype=t.dtype)], dim=dim)


class Buckets:
    """The padded inputs and the lengths they are padded to."""

    def __init__(self, pads: list[PadSpec], lengths: list[int]) -> None:
        if not lengths or min(lengths) < 1:
            raise UserError("--pad-lengths takes lengths >= 1 (16,32,64)")
        names = [p.name for p in pads]
        if len(set(names)) != len(names):
            raise UserError("--pad names an input twice")
        self.pads = {p.name: p for p in pads}
        self.lengths = sorted(set(lengths))

    def check(self, names: list[str]) -> None:
        unknown = [n for n in self.pads if n not in names]
        if unknown:
            raise UserError(f"--pad {unknown[0]}: the model has no input of that name (its inputs: {', '.join(names)})")

    def length_of(self, tensors: dict[str, torch.Tensor]) -> int:
        """The request's length: the same along DIM in every padded input; a ValueError if not."""
        found = {}
        for name, pad in self.pads.items():
            t = tensors[name]
            if t.dim() <= pad.dim:
                raise ValueError(f"input {name} has no dim {pad.dim} to pad")
            found[name] = t.shape[pad.dim]
        if len(set(found.values())) != 1:
            raise ValueError("the padded inputs differ in length: " + ", ".join(f"{n} {v}" for n, v in found.items()))
        length = next(iter(found.values()))
        if length < 1 or length > self.lengths[-1]:
            raise ValueError(f"length {length} is outside 1..{self.lengths[-1]} (--pad-lengths)")
        return length

    def bucket_of(self, length: int) -> int:
        return next(b for b in self.lengths if b >= length)

    def pad(self, tensors: dict[str, torch.Tensor], bucket: int) -> dict[str, torch.Tensor]:
        return {
            n: _resize(t, self.pads[n].dim, bucket, self.pads[n].value) if n in self.pads else t
            for n, t in tensors.items()
        }

    def example_at(self, example: ModelInputs, names: list[str], bucket: int) -> ModelInputs:
        """The example with its padded inputs cut or padded to ``bucket`` (to calibrate at it)."""
        positional = names[: len(example.args)]
        args = tuple(
            _resize(a, self.pads[n].dim, bucket, self.pads[n].value) if n in self.pads else a
            for n, a in zip(positional, example.args)
        )
        kwargs = {
            k: _resize(v, self.pads[k].dim, bucket, self.pads[k].value) if k in self.pads else v
            for k, v in example.kwargs.items()
        }
        return ModelInputs(args, kwargs)


class BucketedPredictor:
    """A :class:`~samebits.runtime.plan.Runner` of one Predictor per bucket length, chosen by the
    batch's padded length. Its plan is the shortest bucket's, with every bucket's verified sizes
    in ``sizes_by_length``; its fingerprint is theirs (one process, one environment)."""

    def __init__(self, predictors: dict[int, Predictor], buckets: Buckets, names: list[str]) -> None:
        self.predictors, self.buckets, self.names = predictors, buckets, names
        first = predictors[buckets.lengths[0]]
        self.fingerprint = first.fingerprint
        self.plan = dataclasses.replace(
            first.plan, sizes_by_length={length: p.plan.sizes for length, p in predictors.items()}
        )

    def key(self, inputs: ModelInputs) -> int:
        """The padded length of a batch (already padded to a bucket)."""
        name, pad = next(iter(self.buckets.pads.items()))
        tensors = {**dict(zip(self.names, inputs.args)), **inputs.kwargs}
        return int(tensors[name].shape[pad.dim])

    def predict(self, inputs: ModelInputs) -> Any:
        return self.predictors[self.key(inputs)].predict(inputs)

    def close(self) -> None:
        for p in self.predictors.values():
            p.close()
