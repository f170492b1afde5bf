"""Samples and batches of model inputs, on the output tree's row rules (``tensors.tree``): split
inputs into samples, build batches around one sample with random neighbours, pad and join."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from samebits.models.inputs import ModelInputs
from samebits.tensors import tree


def _as_tree(inputs: ModelInputs) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (tuple(inputs.args), dict(inputs.kwargs))


def _from_tree(obj: tuple[tuple[Any, ...], dict[str, Any]]) -> ModelInputs:
    return ModelInputs(tuple(obj[0]), dict(obj[1]))


def _plain(inputs: ModelInputs, dim: int) -> list[torch.Tensor] | None:
    """The arguments, where every one is a plain tensor with ``dim`` (the common case, served
    without walking the tree); ``None`` otherwise."""
    values = [*inputs.args, *inputs.kwargs.values()]
    if values and all(type(v) is torch.Tensor and v.dim() > dim for v in values):
        return values
    return None


def _rows_alike(values: list[torch.Tensor], dim: int) -> bool:
    """Whether every tensor has the same size along ``dim`` (all are rows of one batch)."""
    n = values[0].shape[dim]
    return all(v.shape[dim] == n for v in values)


def batch_size_of(inputs: ModelInputs, dim: int = 0) -> int | None:
    """The batch size of ``inputs``: the size along ``dim`` of the first tensor argument, or the
    length of the first list argument (torchvision-style images). ``None`` if neither."""
    plain = _plain(inputs, dim)
    if plain is not None:
        return int(plain[0].shape[dim])
    return tree.batch_size(_as_tree(inputs), dim)


def _size(inputs: ModelInputs, dim: int) -> int:
    n = batch_size_of(inputs, dim)
    if n is None:
        raise tree.RowError(f"the inputs have no batch dimension {dim}")
    return n


def take_rows(inputs: ModelInputs, start: int, stop: int, dim: int = 0) -> ModelInputs:
    """Rows ``start:stop`` of a batch (still a batch); arguments without the batch dim are shared."""
    plain = _plain(inputs, dim)
    if plain is not None:
        n = plain[0].shape[dim]
        rows = lambda t: t.narrow(dim, start, stop - start) if t.shape[dim] == n else t  # noqa: E731
        return ModelInputs(tuple(rows(t) for t in inputs.args), {k: rows(t) for k, t in inputs.kwargs.items()})
    return _from_tree(tree.take(_as_tree(inputs), start, stop, _size(inputs, dim), dim=dim))


@dataclasses.dataclass
class Sample(ModelInputs):
    """One sample (a batch of one), with the range ``[low, high)`` of each integer input across
    the batch it was taken from: its neighbours are drawn over the whole batch's range, so that
    inputs describing a row (lengths, masks, ids) vary between neighbours as between real rows."""

    int_ranges: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def take_sample(inputs: ModelInputs, index: int, dim: int = 0) -> Sample:
    """Sample ``index`` of a batch, kept as a batch of one (its tensors copied)."""
    one = take_rows(inputs, index, index + 1, dim)
    args, kwargs = tree.map_tensors(torch.clone, _as_tree(one))
    ranges = {
        path: (int(t.min()), int(t.max()) + 1)
        for path, t in tree.flatten(_as_tree(inputs)).items()
        if isinstance(t, torch.Tensor) and t.numel() and not t.is_floating_point() and t.dtype != torch.bool
    }
    return Sample(tuple(args), dict(kwargs), ranges)


def random_neighbour(sample: ModelInputs, generator: torch.Generator, dim: int = 0) -> ModelInputs:
    """A random sample shaped like ``sample`` (a batch of one): floats with its mean and spread,
    integers in the range of the batch it was taken from (:class:`Sample`; else its own range).
    In a list input (images, targets) a tensor entry is drawn the same way and any other entry (a
    target's dict of boxes and labels) is copied from the sample."""
    ranges = sample.int_ranges if isinstance(sample, Sample) else {}

    def rand(t: torch.Tensor, _dim: int = 0, path: str = "") -> torch.Tensor:
        if t.dtype == torch.bool:
            out = torch.randint(0, 2, t.shape, generator=generator).bool()
        elif t.is_floating_point():
            ref = t.detach().double()
            std = float(ref.std()) if t.numel() > 1 else 1.0
            out = (
                torch.randn(t.shape, generator=generator, dtype=torch.float64) * (std or 1.0) + float(ref.mean())
            ).to(t.dtype)
        elif t.numel() == 0:
            out = t.clone()
        else:
            low, high = ranges.get(path, (int(t.min()), int(t.max()) + 1))
            out = torch.randint(low, max(high, low + 1), t.shape, generator=generator, dtype=t.dtype)
        return out.to(t.device)

    def entry(e: Any) -> Any:
        return rand(e) if isinstance(e, torch.Tensor) else copy.deepcopy(e)

    return _from_tree(tree.map_rows(_as_tree(sample), 1, rand, entry, dim=dim))


def concat_batches(batches: list[ModelInputs], dim: int = 0) -> ModelInputs:
    """One batch from several of the same structure, in order (row tensors concatenated along
    ``dim``, row lists joined; arguments without rows taken from the first)."""
    plain = [_plain(b, dim) for b in batches]
    head = batches[0]
    if all(
        p is not None
        and len(b.args) == len(head.args)
        and b.kwargs.keys() == head.kwargs.keys()
        and _rows_alike(p, dim)
        for p, b in zip(plain, batches)
    ):  # every argument a row tensor: joined without walking the tree (a served batch)
        return ModelInputs(
            tuple(torch.cat([b.args[i] for b in batches], dim) for i in range(len(head.args))),
            {k: torch.cat([b.kwargs[k] for b in batches], dim) for k in head.kwargs},
        )
    sizes = [_size(b, dim) for b in batches]
    return _from_tree(tree.join([_as_tree(b) for b in batches], sizes, dim=dim, strict=False))


def stack_samples(samples: list[ModelInputs], dim: int = 0) -> ModelInputs:
    """One batch from samples that are batches of one, in order."""
    return concat_batches(samples, dim)


def pad_to(batch: ModelInputs, rows: int, size: int) -> ModelInputs:
    """``batch`` (``rows`` rows) padded to ``size`` rows by repeating its last real sample."""
    if size == rows:
        return batch
    last = take_rows(batch, rows - 1, rows)
    return concat_batches([batch, *([last] * (size - rows))])


def lift(samples: list[ModelInputs], template: ModelInputs) -> ModelInputs:
    """Samples without a batch dim (one image, one row of token ids) as one batch shaped like
    ``template`` (the model's example batch)."""
    n = _size(template, 0)
    return _from_tree(tree.stack([_as_tree(s) for s in samples], _as_tree(template), n))


def output_rows(output: object, start: int, stop: int, n: int, *, dim: int = 0) -> Any:
    """Rows ``start:stop`` of a batched output (a batch of ``n`` along ``dim``); an output without
    the batch dim is a :class:`~samebits.tensors.tree.RowError`, never dropped."""
    return tree.take(output, start, stop, n, dim=dim, strict=True)


def output_row(output: object, index: int, n: int) -> Any:
    """Sample ``index`` of a batched output (a batch of ``n``), without the batch dimension."""
    return tree.row(output, index, n, strict=True)


def join_outputs(outputs: list[Any], sizes: list[int]) -> Any:
    """Batched outputs of consecutive chunks (``sizes[i]`` rows each) joined into one."""
    return tree.join(outputs, sizes, strict=True)
