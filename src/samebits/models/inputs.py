"""Model inputs: torch.export's convention (a tuple is positional args, a dict keyword args)."""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

from samebits import deadline
from samebits.errors import SpecError, UserError, first_line, user_code
from samebits.tensors.tree import is_namedtuple

Model = Callable[..., Any]
"""What samebits runs: an ``nn.Module``, a ``ScriptModule``, an exported program's module, or
another callable runner (an ONNX session's wrapper); its forward is a call."""


@dataclasses.dataclass
class ModelInputs:
    """Positional and keyword arguments for one forward call."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_example(cls, example: object) -> ModelInputs:
        """A tuple is positional arguments, a dict keyword arguments, anything else one argument."""
        if isinstance(example, ModelInputs):
            return example
        if isinstance(example, tuple) and not is_namedtuple(example):
            return cls(args=example)
        if isinstance(example, dict):
            return cls(kwargs=dict(example))
        return cls(args=(example,))

    def call(self, model: Model) -> Any:
        """One forward of ``model`` on these inputs (the user's code: its ``sys.exit()`` is an error)."""
        with user_code("the model's forward"):
            out = model(*self.args, **self.kwargs)
        deadline.feed()  # progress, for the CLI's hang watchdog
        return out

    def named(self) -> dict[str, Any]:
        """The arguments by name (``args.N``, ``kwargs.NAME``): the one path scheme of inputs, as a
        safetensors file holds them and as :meth:`leaves` extends it into nested arguments."""
        return {
            **{f"args.{i}": a for i, a in enumerate(self.args)},
            **{f"kwargs.{k}": v for k, v in self.kwargs.items()},
        }

    def leaves(self) -> dict[str, Any]:
        """Every leaf of every argument by path: its name (:meth:`named`), then its path inside a
        nested argument (``kwargs.past[0].keys``)."""
        from samebits.tensors.tree import flatten

        return {name + sub: leaf for name, value in self.named().items() for sub, leaf in flatten(value).items()}

    @classmethod
    def from_named(cls, values: dict[str, Any]) -> ModelInputs:
        """The inverse of :meth:`named`."""
        positional = sorted((k for k in values if k.startswith("args.")), key=lambda k: int(k[5:]))
        return cls(
            tuple(values[k] for k in positional), {k[7:]: v for k, v in values.items() if k.startswith("kwargs.")}
        )


DTYPES = {
    name: getattr(torch, name)
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
}
DTYPES.update(
    {"float": torch.float32, "double": torch.float64, "half": torch.float16, "long": torch.int64, "int": torch.int32}
)


def forward_parameters(model: Model) -> list[tuple[str, bool]]:
    """The named inputs of ``model``'s forward, in order, each with whether it is required;
    empty where the forward has no Python signature."""
    forward = getattr(model, "forward", model)
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [(p.name, p.default is inspect.Parameter.empty) for p in params if p.kind in kinds]


def parse_dtype(name: str) -> torch.dtype:
    key = name.removeprefix("torch.")
    if key not in DTYPES:
        raise UserError(f"unknown dtype '{name}'; use one of {', '.join(sorted(DTYPES))}")
    return DTYPES[key]


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"--input-shape '{text}' is not a comma-separated list of sizes, e.g. 4,3,32,32") from None
    if not shape or any(s < 0 for s in shape):
        raise UserError(f"--input-shape '{text}' must list one or more sizes >= 0, e.g. 4,3,32,32")
    return shape


def parse_int_range(text: str) -> tuple[int, int]:
    try:
        low, high = (int(p) for p in text.split(","))
    except ValueError:
        raise UserError(f"--int-range '{text}' must be LOW,HIGH, e.g. 0,512") from None
    if high <= low:
        raise UserError(f"--int-range '{text}': HIGH must be greater than LOW")
    return low, high


MAX_RANDOM_INPUT_MB = 4096


def random_inputs(
    shapes: list[str], dtypes: list[str] | None = None, int_range: str | None = None, seed: int = 0
) -> ModelInputs:
    """Seeded random tensors, one positional argument per shape (``--input-shape``).

    One dtype applies to every shape; otherwise give one per shape. Integer dtypes draw from
    ``int_range`` (LOW,HIGH, HIGH exclusive; default 0,100), e.g. token ids.
    """
    dtypes = dtypes or ["float32"]
    if len(dtypes) not in (1, len(shapes)):
        raise UserError(f"give one --dtype for all shapes or one per --input-shape ({len(shapes)}), not {len(dtypes)}")
    gen = torch.Generator().manual_seed(seed)
    low, high = parse_int_range(int_range) if int_range else (0, 100)
    args = []
    for i, text in enumerate(shapes):
        shape, dtype = parse_shape(text), parse_dtype(dtypes[0] if len(dtypes) == 1 else dtypes[i])
        size_mb = math.prod(shape) * torch.empty((), dtype=dtype).element_size() / 2**20
        if size_mb > MAX_RANDOM_INPUT_MB:
            raise UserError(
                f"--input-shape {text} is {size_mb:,.0f} MB of {dtype}; samebits makes random inputs up to {MAX_RANDOM_INPUT_MB:,} MB (use a smaller shape, or --input FILE)"
            )
        if dtype == torch.bool:
            args.append(torch.randint(0, 2, shape, generator=gen).bool())
        elif dtype.is_floating_point:
            args.append(torch.randn(shape, generator=gen).to(dtype))
        else:
            args.append(torch.randint(low, high, shape, generator=gen, dtype=dtype))
    return ModelInputs(args=tuple(args))


def load_input_file(path: str | Path) -> ModelInputs:
    """Inputs from ``.pt`` (``weights_only=True``), ``.npy`` (no pickle) or ``.safetensors``.

    In a ``.safetensors`` file, tensors named ``0``, ``1``, ... are positional arguments and
    other names keyword arguments.
    """
    p = Path(path)
    if p.is_dir():
        raise SpecError(f"input file '{p}' is a directory; give a .pt, .npy or .safetensors file")
    if not p.is_file():
        raise SpecError(f"input file '{p}' does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix in (".pt", ".pth"):
            return ModelInputs.from_example(torch.load(p, map_location="cpu", weights_only=True))
        if suffix == ".npy":
            import numpy as np

            return ModelInputs(args=(torch.from_numpy(np.load(p, allow_pickle=False)).clone(),))
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            tensors = {k: v.clone() for k, v in load_file(str(p)).items()}  # aligned memory: see golden/format.py
            positional = sorted((k for k in tensors if k.isdigit()), key=int)
            return ModelInputs(
                args=tuple(tensors[k] for k in positional), kwargs={k: v for k, v in tensors.items() if not k.isdigit()}
            )
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(f"cannot read input file '{p}': {first_line(exc)}") from exc
    raise SpecError(f"input file '{p}' has an unknown type; use .pt, .npy or .safetensors")
