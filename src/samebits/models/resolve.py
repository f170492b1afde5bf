"""Choose a model's inputs: an input file, random shapes, or the spec's own example."""

from __future__ import annotations

from samebits.errors import UserError
from samebits.models.inputs import ModelInputs, load_input_file, random_inputs
from samebits.models.spec import LoadedModel


def resolve_inputs(
    loaded: LoadedModel,
    input_file: str | None = None,
    input_shapes: list[str] | None = None,
    dtypes: list[str] | None = None,
    int_range: str | None = None,
    seed: int = 0,
) -> ModelInputs:
    """``--input FILE`` wins, then ``--input-shape``, then the example inputs from the spec."""
    if input_file and input_shapes:
        raise UserError("give --input or --input-shape, not both")
    if input_file:
        return load_input_file(input_file)
    if input_shapes:
        return random_inputs(input_shapes, dtypes, int_range, seed)
    if dtypes or int_range:
        raise UserError("--dtype and --int-range apply to --input-shape; give the shapes too")
    if loaded.example_inputs is None:
        raise UserError(
            f"MODEL '{loaded.spec}' comes with no example inputs; pass --input FILE or --input-shape 4,3,32,32"
        )
    return loaded.example_inputs
