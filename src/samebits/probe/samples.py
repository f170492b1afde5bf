"""The probe inputs (each sent as its own request of one row) and the filler traffic mixed with
them: rows of a tensor file or of a MODEL's example inputs (the loaders ``check`` uses), random
rows of the shapes and datatypes the server's metadata gives (from a seed), prompts for
OpenAI-compatible endpoints; the filler is other random rows (prompts) like them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from samebits.errors import UserError
from samebits.probe import wire
from samebits.probe.clients import InputSpec, Sample

PROMPTS = (
    "The capital of France is",
    "Once upon a time, there was",
    "def fibonacci(n):",
    "The three primary colours are",
    "Water boils at a temperature of",
    "In 1969, the first person to walk on the Moon was",
    "A haiku about autumn:",
    "The quick brown fox",
)
MAX_PROMPT_FILE = 4 << 20


def from_metadata(specs: list[InputSpec], count: int, seed: int, int_range: tuple[int, int]) -> list[Sample]:
    """``count`` random rows of the served inputs (floats normal, integers in ``int_range``, HIGH
    exclusive), from ``seed``; a dimension other than the batch that is variable is refused."""
    rng = np.random.default_rng(seed)
    for spec in specs:
        if any(d < 0 for d in spec.shape[1:]):
            raise UserError(
                f"input {spec.name} has a variable dimension besides the batch ({list(spec.shape)}); give --inputs FILE"
            )
        if spec.datatype not in wire.NUMPY:
            raise UserError(f"input {spec.name} is {spec.datatype}; give --inputs FILE for it")
    return [
        Sample(f"row {i}", tuple(_random(rng, s.name, s.datatype, (1, *s.shape[1:]), int_range) for s in specs))
        for i in range(count)
    ]


def _random(
    rng: np.random.Generator, name: str, datatype: str, shape: tuple[int, ...], ints: tuple[int, int]
) -> wire.Tensor:
    if datatype == "BOOL":
        return wire.from_array(name, rng.integers(0, 2, shape).astype(bool), datatype)
    if datatype in ("FP16", "BF16", "FP32", "FP64"):
        return wire.from_array(name, rng.standard_normal(shape, dtype=np.float32), datatype)
    return wire.from_array(name, rng.integers(ints[0], ints[1], shape), datatype)


def from_tensors(args: tuple[Any, ...], kwargs: dict[str, Any], names: list[str], count: int) -> list[Sample]:
    """Up to ``count`` rows (dim 0) of torch tensors given as a forward's arguments; positional
    arguments take ``names`` in order (the server's input names), keywords their own."""
    import torch

    named = list(zip(names, args)) + list(kwargs.items())
    if not named:
        raise UserError("the inputs hold no tensors")
    rows = None
    for name, value in named:
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            raise UserError(f"input {name} is a {type(value).__name__}; probe sends tensors with a batch dimension 0")
        if rows is not None and value.shape[0] != rows:
            raise UserError(f"input {name} has {value.shape[0]} rows, the others {rows}")
        rows = value.shape[0]
    assert rows is not None
    samples = []
    for i in range(min(count, rows)):
        tensors = []
        for name, value in named:
            row = value[i : i + 1].detach().cpu().contiguous()
            datatype = wire.datatype_of(row.dtype)
            tensors.append(wire.Tensor(name, datatype, tuple(row.shape), row.view(torch.uint8).numpy().tobytes()))
        samples.append(Sample(f"row {i}", tuple(tensors)))
    return samples


def prompts(path: str | None, count: int) -> list[Sample]:
    """Prompts from a text file (one per line; a ``.jsonl`` file: a string or ``{"prompt": ...}``
    per line), else the built-in ones."""
    if path is None:
        lines = list(PROMPTS)
    else:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"--inputs {path}: no such file")
        data = p.read_bytes()[:MAX_PROMPT_FILE].decode("utf-8", errors="replace")
        lines = [line for line in data.splitlines() if line.strip()]
        if p.suffix == ".jsonl":
            import json

            try:
                items = [json.loads(line) for line in lines]
                lines = [i if isinstance(i, str) else str(i["prompt"]) for i in items]
            except (ValueError, KeyError, TypeError):
                raise UserError(f'--inputs {path}: each line must be a JSON string or {{"prompt": ...}}') from None
        if not lines:
            raise UserError(f"--inputs {path} holds no prompt")
    return [Sample(f"prompt {i}", prompt=text) for i, text in enumerate(lines[:count])]


def fillers(samples: list[Sample], count: int, seed: int) -> list[Sample]:
    """``count`` other inputs like ``samples``: rows of random values with each input's mean and
    spread (integers within its range), or prompts of shuffled words."""
    rng = np.random.default_rng(seed + 1)
    if samples[0].prompt:
        words = " ".join(s.prompt for s in samples).split()
        return [Sample(f"filler {i}", prompt=" ".join(rng.permutation(words)[: 3 + i % 6])) for i in range(count)]
    out = []
    for i in range(count):
        tensors = []
        for k, t in enumerate(samples[0].inputs):
            seen = np.stack([np.asarray(s.inputs[k].values(), dtype=np.float64) for s in samples])
            if t.datatype == "BOOL":
                values: np.ndarray = rng.integers(0, 2, t.shape).astype(bool)
            elif t.datatype in ("FP16", "BF16", "FP32", "FP64"):
                values = rng.standard_normal(t.shape) * (seen.std() or 1.0) + seen.mean()
            else:
                values = rng.integers(int(seen.min()), int(seen.max()) + 1, t.shape)
            tensors.append(wire.from_array(t.name, values, t.datatype))
        out.append(Sample(f"filler {i}", tuple(tensors)))
    return out
