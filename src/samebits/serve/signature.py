"""What a served model takes and gives, named for the protocol: inputs from the forward's
signature (``x``, ``input_ids``) or the example's keywords, outputs from the output tree's paths
(``logits``, ``output_0``), each with its datatype and its shape per row (-1 for the batch)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch
from torch import nn

from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs, forward_parameters
from samebits.serve.protocol import ProtocolError, datatype_of
from samebits.tensors.tree import flatten


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: torch.dtype
    row_shape: tuple[int, ...]  # the shape without the batch dim

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": datatype_of(self.dtype), "shape": [-1, *self.row_shape]}


@dataclasses.dataclass(frozen=True)
class Signature:
    inputs: list[TensorSpec]
    positional: int  # how many of the inputs are positional arguments (the rest are keywords)
    outputs: list[TensorSpec]
    paths: dict[str, str]  # output name -> path in the output tree
    buckets: Any = None  # serve/padding.Buckets where inputs have a variable length (-1 in row_shape)
    crop: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # output -> dims cut back to the length
    ids: dict[str, int] = dataclasses.field(default_factory=dict)  # input -> the embedding size its values index

    def check_ids(self, tensors: dict[str, torch.Tensor]) -> None:
        """A request whose ids fall outside the embedding they index: 400 before it is batched
        (in a batch, the forward would raise for every request in it)."""
        for name, size in self.ids.items():
            t = tensors.get(name)
            if t is not None and t.numel() and (int(t.min()) < 0 or int(t.max()) >= size):
                raise ProtocolError(f"input {name} holds ids outside [0, {size}), the embedding they index")

    def arguments(self, tensors: dict[str, torch.Tensor]) -> ModelInputs:
        """The forward's arguments from a request's named tensors (already checked)."""
        args = tuple(tensors[s.name] for s in self.inputs[: self.positional])
        kwargs = {s.name: tensors[s.name] for s in self.inputs[self.positional :]}
        return ModelInputs(args, kwargs)

    def named_outputs(self, output: object) -> dict[str, torch.Tensor]:
        leaves = flatten(output)
        return {name: leaves[path] for name, path in self.paths.items()}


def output_name(path: str, index: int) -> str:
    """``.logits`` -> ``logits``, ``[0]`` -> ``output_0``, ``.cache[1].values`` -> ``cache.1.values``."""
    name = re.sub(r"\[(\d+)\]", r".\1", path).strip(".")
    name = re.sub(r"\['([^']*)'\]", r".\1", name).strip(".")
    if not name or name[0].isdigit():
        return f"output_{name or index}"
    return name


def argument_names(model: Model, n: int) -> list[str]:
    """The names of the first ``n`` positional inputs of ``model``'s forward (``input_N`` past them)."""
    params = [name for name, _ in forward_parameters(model)]
    return [params[i] if i < len(params) else f"input_{i}" for i in range(n)]


def signature_of(model: Model, example: ModelInputs, output: object) -> Signature:
    """The signature of ``model`` from one example batch and its output; a model whose inputs or
    outputs are not tensors with a batch dim 0 cannot be served (one-line :class:`UserError`)."""
    names = argument_names(model, len(example.args)) + list(example.kwargs)
    values = [*example.args, *example.kwargs.values()]
    inputs = []
    for name, value in zip(names, values):
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            raise UserError(
                f"input {name} is a {type(value).__name__}; samebits serve takes tensors with a batch dimension 0"
            )
        inputs.append(TensorSpec(name, value.dtype, tuple(value.shape[1:])))
    rows = values[0].shape[0]
    outputs, paths = [], {}
    for i, (path, leaf) in enumerate(flatten(output).items()):
        if not isinstance(leaf, torch.Tensor) or leaf.dim() == 0 or leaf.shape[0] != rows:
            raise UserError(
                f"output {path or '<output>'} is not a tensor with one row per sample; samebits serve answers tensors row by row"
            )
        name = output_name(path, i)
        try:
            datatype_of(leaf.dtype)  # a dtype the protocol cannot carry is refused at start
        except ProtocolError as exc:
            raise UserError(f"output {name}: {exc}") from None
        outputs.append(TensorSpec(name, leaf.dtype, tuple(leaf.shape[1:])))
        paths[name] = path
    return Signature(inputs, len(example.args), outputs, paths, ids=indexed_inputs(model, example, names))


def indexed_inputs(model: Model, example: ModelInputs, names: list[str]) -> dict[str, int]:
    """The integer inputs that ``nn.Embedding`` tables read directly, each with its table's size
    (the smallest, where several read one input): found by one watched forward on the example."""
    if not isinstance(model, nn.Module):
        return {}
    values = dict(zip(names, [*example.args, *example.kwargs.values()]))
    ints = {n: v for n, v in values.items() if isinstance(v, torch.Tensor) and not v.is_floating_point()}
    found: dict[str, int] = {}

    def seen(module: nn.Module, args: tuple[Any, ...]) -> None:
        given = args[0] if args else None
        size = int(getattr(module, "num_embeddings"))
        for name, value in ints.items():
            if isinstance(given, torch.Tensor) and given.shape == value.shape and torch.equal(given, value):
                found[name] = min(found.get(name, size), size)

    tables = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    if not ints or not tables:
        return {}
    handles = [m.register_forward_pre_hook(seen) for m in tables]
    try:
        with torch.inference_mode():
            example.call(model)
    except Exception:  # the signature was taken from a forward already: this one only adds the bounds
        return {}
    finally:
        for handle in handles:
            handle.remove()
    return found
