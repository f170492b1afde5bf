"""``samebits.check()``: run every axis, localise, diagnose, report."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from samebits.check.axes.batch import batch_axis
from samebits.check.axes.children import run_children_axes
from samebits.check.axes.in_process import repeat_axis, seed_axis, state_axis
from samebits.check.causes import diagnose
from samebits.check.context import CheckContext, CheckOptions
from samebits.check.report import AXES, AxisResult, CheckReport
from samebits.determinism import deterministic, isolate_rng
from samebits.errors import UserError
from samebits.fingerprint import Fingerprint
from samebits.models import LoadedModel, ModelInputs, load_model
from samebits.probe.prepare import prepare
from samebits.probe.trace import plain_forward

IN_PROCESS = {"repeat": repeat_axis, "seed": seed_axis, "state": state_axis, "batch": batch_axis}


class ForwardError(UserError):
    """The model's forward raised on the given inputs."""


def _validate(options: CheckOptions) -> None:
    unknown = [a for a in options.axes if a not in AXES]
    if unknown:
        raise UserError(f"unknown axis {', '.join(unknown)}; choose from {', '.join(AXES)}")
    if not options.axes:
        raise UserError(f"no axis to run; choose from {', '.join(AXES)}")
    if options.runs < 2:
        raise UserError(f"--runs must be >= 2 to compare runs, got {options.runs}")
    if options.processes < 2:
        raise UserError(f"--processes must be >= 2 to compare processes, got {options.processes}")
    if any(b < 1 for b in options.batch_sizes) or not options.batch_sizes:
        raise UserError("--batch-sizes must be positive integers, e.g. 1,2,4,8")
    if options.threads and any(t < 1 for t in options.threads):
        raise UserError("--threads must be positive integers, e.g. 1,2")
    if options.timeout <= 0:
        raise UserError("--timeout must be > 0 seconds")
    if options.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for, but CUDA is not available here (torch build or driver)")
    if options.atol < 0 or options.rtol < 0:
        raise UserError(f"tolerances must be >= 0 (got atol={options.atol}, rtol={options.rtol})")


@contextlib.contextmanager
def _model_state_kept(model: Any) -> Iterator[Callable[[], None]]:
    """Yield a function that puts the model's buffers and training flags back as they were now;
    it runs again on exit, so the check leaves the user's model as it found it."""
    if not isinstance(model, nn.Module):
        yield lambda: None
        return
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    flags = {name: m.training for name, m in model.named_modules()}

    def reset() -> None:
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers:
                    b.copy_(buffers[name])
        for name, m in model.named_modules():
            m.training = flags.get(name, m.training)

    try:
        yield reset
    finally:
        reset()


def _describe(inputs: ModelInputs) -> str:
    def one(x: Any) -> str:
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
        if isinstance(x, list) and x and all(isinstance(t, torch.Tensor) for t in x):
            return f"list of {len(x)} × {one(x[0])}"
        return type(x).__name__

    parts = [one(a) for a in inputs.args] + [f"{k}={one(v)}" for k, v in inputs.kwargs.items()]
    return ", ".join(parts) or "no arguments"


def _safe(axis: str, fn: Callable[[CheckContext], AxisResult], ctx: CheckContext) -> AxisResult:
    """Run one axis; an exception becomes an ``error`` verdict naming it."""
    try:
        return fn(ctx)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return AxisResult(axis, "error", reason=f"{type(exc).__name__}: {text[0] if text else ''}")


def check(model_or_spec: Any = "demo:mlp", inputs: Any = None, *, progress: Callable[[str], None] | None = None, **options: Any) -> CheckReport:
    """Run ``model_or_spec`` under every variation that changes bits and report what changed.

    ``model_or_spec`` is a MODEL spec string, a :class:`LoadedModel` or an ``nn.Module``;
    ``inputs`` are example inputs (a tuple is positional, a dict keyword arguments) and default
    to the spec's own. ``options`` are the fields of :class:`CheckOptions`. The model's buffers,
    training flags and every global RNG are left as they were.
    """
    start = time.monotonic()
    opts = CheckOptions(**options)
    _validate(opts)
    say = progress or (lambda message: None)
    if isinstance(model_or_spec, str):
        say(f"loading {model_or_spec}")
        loaded = load_model(model_or_spec)
    elif isinstance(model_or_spec, LoadedModel):
        loaded = model_or_spec
    else:
        loaded = LoadedModel(model_or_spec, None, f"<{type(model_or_spec).__name__} object>", "factory")
    spec = loaded.spec if isinstance(model_or_spec, (str, LoadedModel)) else None
    model_inputs = ModelInputs.from_example(inputs) if inputs is not None else loaded.example_inputs
    if model_inputs is None:
        raise UserError(f"MODEL '{loaded.spec}' comes with no example inputs; pass inputs (--input FILE or --input-shape 4,3,32,32)")
    model, model_inputs = prepare(loaded.model, model_inputs, opts.device, opts.dtype)
    hookable = loaded.hookable
    predictor = None
    if opts.runtime:
        from samebits.runtime.predictor import parse_runtime, runtime_model

        parse_runtime(opts.runtime)
        say(f"building the {opts.runtime} runtime")
        with isolate_rng(opts.device):
            model = runtime_model(model, model_inputs, opts.runtime)
        predictor, hookable = model.predictor, False
    ctx = CheckContext(model, model_inputs, opts, spec, hookable, say)
    results: dict[str, AxisResult] = {}
    with isolate_rng(opts.device), _model_state_kept(model) as reset, contextlib.ExitStack() as stack:
        if predictor is not None:
            stack.callback(predictor.close)
        try:
            plain_forward(model, model_inputs)
        except Exception as exc:
            text = str(exc).strip().splitlines()
            raise ForwardError(f"the model's forward raised {type(exc).__name__}: {text[0] if text else ''}") from exc
        reset()
        for axis in [a for a in AXES if a in opts.axes and a in IN_PROCESS]:
            say(f"axis {axis}")
            results[axis] = _safe(axis, IN_PROCESS[axis], ctx)
            reset()
        children = [a for a in ("process", "threads") if a in opts.axes]
        if children:
            say("axes " + " and ".join(children))
            try:
                results.update(run_children_axes(ctx, children))
            except Exception as exc:
                results.update({a: AxisResult(a, "error", reason=f"{type(exc).__name__}: {exc}") for a in children})

        def rerun(axis: str, condition: str) -> AxisResult:
            say(f"re-running {axis} with {'model.eval()' if condition == 'eval' else 'samebits.deterministic()'}")
            reset()
            try:
                if condition == "eval":
                    model.eval()
                    return _safe(axis, IN_PROCESS[axis], ctx)
                with deterministic(opts.seed, device=opts.device):
                    return _safe(axis, IN_PROCESS[axis], ctx)
            finally:
                reset()

        causes = diagnose(results, model, rerun)
    ordered = [results[a] for a in AXES if a in results]
    note = None if loaded.hookable else f"localisation is unavailable: hooks cannot see inside a {loaded.kind} model"
    if opts.runtime:
        note = f"ran through {opts.runtime}; localisation is unavailable there (hooks would see the Predictor's tiles, not these batches)"
    return CheckReport(loaded.spec, _describe(model_inputs), ordered, causes, Fingerprint.capture().to_dict(), note, time.monotonic() - start)
