"""What the capabilities accept as a model: a MODEL spec, a LoadedModel, or an object."""

from __future__ import annotations

from typing import Any

from torch import nn

from samebits.errors import UserError
from samebits.models.inputs import Model, ModelInputs
from samebits.models.spec import LoadedModel, load_model

ModelOrSpec = str | LoadedModel | Model
"""A MODEL spec (``file.py:factory``, ``demo:NAME``, ...), a loaded model, or the model itself."""


def as_loaded(model_or_spec: ModelOrSpec) -> LoadedModel:
    """A spec is loaded; a :class:`LoadedModel` is kept; any other object (an ``nn.Module``, a
    callable) is wrapped as an in-memory model labelled ``<Type object>``."""
    if isinstance(model_or_spec, str):
        return load_model(model_or_spec)
    if isinstance(model_or_spec, LoadedModel):
        return model_or_spec
    return LoadedModel(model_or_spec, None, f"<{type(model_or_spec).__name__} object>", "factory", in_memory=True)


def eval_mode(model: Model) -> Any:
    """``model`` put in eval mode where it has one; a ``torch.export`` module keeps the mode it
    was exported in (its ``eval()`` raises ``NotImplementedError``)."""
    if isinstance(model, nn.Module):
        try:
            model.eval()
        except NotImplementedError:
            pass
    return model


def spec_of(loaded: LoadedModel) -> str | None:
    """The MODEL spec a fresh process could load, or ``None`` for an in-memory model."""
    return None if loaded.in_memory else loaded.spec


def inputs_for(
    loaded: LoadedModel, inputs: object, hint: str = "pass inputs (--input FILE or --input-shape 4,3,32,32)"
) -> ModelInputs:
    """``inputs`` (torch.export's convention) if given, else the spec's example inputs."""
    model_inputs = ModelInputs.from_example(inputs) if inputs is not None else loaded.example_inputs
    if model_inputs is None:
        raise UserError(f"MODEL '{loaded.spec}' comes with no example inputs; {hint}")
    return model_inputs
