"""The MODEL argument and input options shared by the commands that run a model."""

from __future__ import annotations

from typing import Any, Optional

import typer

MODEL_HELP = "MODEL: file.py:factory, package.module:factory, a TorchScript .pt, a torch.export .pt2, an .onnx file, or demo:NAME."

ModelArg = typer.Argument("demo:mlp", metavar="[MODEL]", help=MODEL_HELP + " Default: demo:mlp.", show_default=False)
InputOpt = typer.Option(
    None, "--input", metavar="FILE", help="Inputs from a .pt (weights_only), .npy or .safetensors file."
)
ShapeOpt = typer.Option(
    None, "--input-shape", metavar="4,3,32,32", help="Seeded random input of this shape (repeat for several arguments)."
)
DtypeOpt = typer.Option(
    None,
    "--dtype",
    metavar="D",
    help="A float dtype casts the model and its float inputs; with --input-shape, the dtype of the random inputs (once, or once per shape).",
)


def absolute(path: Optional[str]) -> Optional[str]:
    """An output path made absolute when the command line is read, before any user code runs
    (a factory or forward that changes the working folder cannot move where samebits writes);
    ``-`` (stdout) and ``None`` stay."""
    import os

    return path if path in (None, "-") else os.path.join(os.getcwd(), path)


JsonOpt = typer.Option(
    None, "--json", metavar="PATH", callback=absolute, help="Also write the report as JSON ('-' for stdout)."
)
HtmlOpt = typer.Option(
    None,
    "--html",
    metavar="FILE",
    callback=absolute,
    help="Also write the report as one self-contained HTML page (extra: report).",
)
DeviceOpt = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or mps.")
IntRangeOpt = typer.Option(
    None, "--int-range", metavar="LOW,HIGH", help="Range of integer --input-shape inputs (token ids), HIGH exclusive."
)


def parse_ints(text: Optional[str], name: str) -> Optional[tuple[int, ...]]:
    """``"1,2,4"`` -> ``(1, 2, 4)``; a user error naming the option otherwise."""
    from samebits.errors import UserError

    if text is None:
        return None
    try:
        return tuple(int(p) for p in text.split(","))
    except ValueError:
        raise UserError(f"{name} must be a comma-separated list of integers, e.g. 1,2,4") from None


def bound_loading(timeout: float | None = None) -> None:
    """Bound every model load of this command (and of its child processes): ``timeout`` (the
    command's ``--timeout``), else ``$SAMEBITS_LOAD_TIMEOUT``, else 300 s."""
    import os

    from samebits import deadline
    from samebits.errors import UserError

    if timeout is not None:
        if not timeout > 0:
            raise UserError(f"--timeout must be > 0 seconds, not {timeout:g}")
        deadline.limit_loading(timeout)
    elif deadline.LOAD_TIMEOUT_ENV not in os.environ:
        deadline.limit_loading(deadline.DEFAULT_LOAD_TIMEOUT)


def load_target(
    model: str,
    input_file: Optional[str],
    shapes: Optional[list[str]],
    dtypes: Optional[list[str]],
    int_range: Optional[str],
    seed: int,
) -> tuple[Any, Any, Optional[str]]:
    """Load MODEL and its inputs; return (loaded model, inputs, the dtype to cast the model to)."""
    from samebits.models import load_model, resolve_inputs
    from samebits.models.inputs import parse_dtype

    parsed = [parse_dtype(d) for d in dtypes or []]
    model_dtype = dtypes[0] if dtypes and len(parsed) == 1 and parsed[0].is_floating_point else None
    loaded = load_model(model)
    inputs = resolve_inputs(loaded, input_file, shapes, dtypes if shapes else None, int_range, seed)
    return loaded, inputs, model_dtype
