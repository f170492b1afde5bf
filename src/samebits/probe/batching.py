"""Samples and batches: split example inputs into samples, build batches around one sample with
random neighbours, and pick one sample's part out of a batched output."""

from __future__ import annotations

from typing import Any

import torch

from samebits.models.inputs import ModelInputs


def _is_tensor_list(x: Any) -> bool:
    return isinstance(x, list) and bool(x) and all(isinstance(t, torch.Tensor) for t in x)


def batch_size_of(inputs: ModelInputs, dim: int = 0) -> int | None:
    """The batch size of ``inputs``: the size along ``dim`` of the first tensor argument, or the
    length of the first list-of-tensors argument (torchvision-style models). ``None`` if neither."""
    for arg in [*inputs.args, *inputs.kwargs.values()]:
        if isinstance(arg, torch.Tensor) and arg.dim() > dim:
            return int(arg.shape[dim])
        if _is_tensor_list(arg):
            return len(arg)
    return None


def _map_batched(inputs: ModelInputs, n: int, dim: int, fn: Any) -> ModelInputs:
    def one(arg: Any) -> Any:
        if isinstance(arg, torch.Tensor) and arg.dim() > dim and arg.shape[dim] == n:
            return fn(arg, True)
        if _is_tensor_list(arg) and len(arg) == n:
            return fn(arg, False)
        return arg

    return ModelInputs(tuple(one(a) for a in inputs.args), {k: one(v) for k, v in inputs.kwargs.items()})


def take_sample(inputs: ModelInputs, index: int, dim: int = 0) -> ModelInputs:
    """Sample ``index`` of a batch, kept as a batch of one."""
    n = batch_size_of(inputs, dim)
    assert n is not None

    def take(arg: Any, is_tensor: bool) -> Any:
        return arg.narrow(dim, index, 1).clone() if is_tensor else [arg[index]]

    return _map_batched(inputs, n, dim, take)


def random_neighbour(sample: ModelInputs, generator: torch.Generator, dim: int = 0) -> ModelInputs:
    """A random sample shaped like ``sample``: floats with its mean and spread, integers in its range."""

    def rand(t: torch.Tensor) -> torch.Tensor:
        if t.dtype == torch.bool:
            return torch.randint(0, 2, t.shape, generator=generator).bool()
        if t.is_floating_point():
            ref = t.detach().double()
            std = float(ref.std()) if t.numel() > 1 else 1.0
            return (torch.randn(t.shape, generator=generator, dtype=torch.float64) * (std or 1.0) + float(ref.mean())).to(t.dtype)
        low, high = int(t.min()), int(t.max()) + 1
        return torch.randint(low, max(high, low + 1), t.shape, generator=generator, dtype=t.dtype)

    def make(arg: Any, is_tensor: bool) -> Any:
        return rand(arg).to(arg.device) if is_tensor else [rand(t).to(t.device) for t in arg]

    return _map_batched(sample, 1, dim, make)


def concat_batches(batches: list[ModelInputs], dim: int = 0) -> ModelInputs:
    """One batch from several of the same structure, in order (tensors concatenated along
    ``dim``, lists of tensors joined; other arguments taken from the first)."""
    first = batches[0]
    sizes = [batch_size_of(b, dim) for b in batches]

    def join(position: int | str) -> Any:
        parts = [b.args[position] if isinstance(position, int) else b.kwargs[position] for b in batches]
        head = parts[0]
        if isinstance(head, torch.Tensor) and head.dim() > dim and all(p.shape[dim] == n for p, n in zip(parts, sizes)):
            return torch.cat(parts, dim)
        if _is_tensor_list(head) and all(len(p) == n for p, n in zip(parts, sizes)):
            return [t for p in parts for t in p]
        return head

    return ModelInputs(tuple(join(i) for i in range(len(first.args))), {k: join(k) for k in first.kwargs})


def stack_samples(samples: list[ModelInputs], dim: int = 0) -> ModelInputs:
    """One batch from samples that are batches of one, in order."""
    return concat_batches(samples, dim)


def take_rows(inputs: ModelInputs, start: int, stop: int, dim: int = 0) -> ModelInputs:
    """Rows ``start:stop`` of a batch (still a batch)."""
    n = batch_size_of(inputs, dim)
    assert n is not None

    def take(arg: Any, is_tensor: bool) -> Any:
        return arg.narrow(dim, start, stop - start) if is_tensor else list(arg[start:stop])

    return _map_batched(inputs, n, dim, take)


def first_rows(output: Any, n_total: int, n_real: int) -> Any:
    """The part of a batched output that belongs to its first ``n_real`` rows (padding dropped)."""
    if isinstance(output, torch.Tensor):
        if output.dim() == 0 or output.shape[0] != n_total:
            raise ValueError(f"an output's leading dim is {tuple(output.shape)[:1]} for a batch of {n_total}")
        return output[:n_real]
    if isinstance(output, list) and len(output) == n_total:
        return output[:n_real]
    if isinstance(output, dict):
        return {k: first_rows(v, n_total, n_real) for k, v in output.items()}
    if isinstance(output, tuple):
        parts = [first_rows(v, n_total, n_real) for v in output]
        return type(output)(*parts) if hasattr(output, "_fields") else tuple(parts)
    return output


def join_rows(outputs: list[Any]) -> Any:
    """Batched outputs of consecutive chunks joined into one (the inverse of splitting rows)."""
    head = outputs[0]
    if isinstance(head, torch.Tensor):
        return torch.cat(outputs, 0)
    if isinstance(head, list):
        return [item for out in outputs for item in out]
    if isinstance(head, dict):
        return {k: join_rows([o[k] for o in outputs]) for k in head}
    if isinstance(head, tuple):
        parts = [join_rows([o[i] for o in outputs]) for i in range(len(head))]
        return type(head)(*parts) if hasattr(head, "_fields") else tuple(parts)
    return head


def row_of(output: Any, index: int) -> Any:
    """Sample ``index`` of a batched output, without the batch dimension."""
    if isinstance(output, torch.Tensor):
        return output[index]
    if isinstance(output, list):
        return output[index]
    if isinstance(output, dict):
        return {k: row_of(v, index) for k, v in output.items()}
    if isinstance(output, tuple):
        parts = [row_of(v, index) for v in output]
        return type(output)(*parts) if hasattr(output, "_fields") else tuple(parts)
    return output


def sample_view(alone: Any, batched: Any, index: int, n: int) -> Any:
    """The part of ``batched`` (a batch of ``n``) that belongs to sample ``index``, shaped like
    ``alone`` (the output for that sample as a batch of one). Raises ``ValueError`` where the two
    outputs cannot be matched (e.g. a model that reduces over the batch)."""
    if isinstance(alone, torch.Tensor):
        if not isinstance(batched, torch.Tensor) or alone.dim() == 0 or batched.dim() == 0:
            raise ValueError("an output has no batch dimension")
        if alone.shape[0] != 1 or batched.shape[0] != n:
            raise ValueError(f"an output's leading dim is {batched.shape[0]} for a batch of {n} (and {alone.shape[0]} for one)")
        return batched[index : index + 1]
    if isinstance(alone, list) and isinstance(batched, list) and len(alone) == 1 and len(batched) == n:
        return [batched[index]]  # one entry per sample: torchvision-style list[dict]
    if isinstance(alone, dict) and isinstance(batched, dict) and alone.keys() == batched.keys():
        return {k: sample_view(alone[k], batched[k], index, n) for k in alone}
    if isinstance(alone, (list, tuple)) and isinstance(batched, (list, tuple)) and len(alone) == len(batched):
        parts = [sample_view(a, b, index, n) for a, b in zip(alone, batched)]
        return type(alone)(parts) if not hasattr(alone, "_fields") else type(alone)(*parts)
    if not isinstance(alone, torch.Tensor) and alone == batched:
        return batched
    raise ValueError(f"cannot match a {type(alone).__name__} output for one sample with the batched output")
