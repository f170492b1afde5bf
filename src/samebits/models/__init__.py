"""MODEL specs and inputs: loading models, their example inputs, and the built-in demos."""

from samebits.models.demos import DEMOS, describe_demos
from samebits.models.inputs import ModelInputs, load_input_file, random_inputs
from samebits.models.resolve import resolve_inputs
from samebits.models.spec import SPEC_HELP, LoadedModel, load_model

__all__ = [
    "DEMOS",
    "SPEC_HELP",
    "LoadedModel",
    "ModelInputs",
    "describe_demos",
    "load_input_file",
    "load_model",
    "random_inputs",
    "resolve_inputs",
]
