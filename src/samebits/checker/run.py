"""``samebits.check()``: run every axis, localise, diagnose, report."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable


from samebits.measure.model_state import model_given_back
from samebits.checker.axes.batch import batch_axis
from samebits.checker.axes.children import ChildAxes
from samebits.checker.axes.in_process import changed_tensors, repeat_axis, seed_axis, state_axis, state_digests
from samebits.checker.axes.layout import layout_axis
from samebits.checker.axes.threads import threads_axis
from samebits.checker.causes import diagnose
from samebits.checker.context import CheckContext, CheckOptions
from samebits.checker.report import AXES, AxisResult, CheckReport
from samebits.determinism import deterministic, isolate_rng
from samebits.errors import UserError, first_line
from samebits.fingerprint import Fingerprint
from samebits.limits import batch_rows, thread_count
from samebits.tensors.compare import check_tolerances
from samebits.models.target import ModelOrSpec, as_loaded, eval_mode, inputs_for, spec_of
from samebits.measure.guard import check_forward, describe_inputs, model_state_kept, torch_env_kept
from samebits.measure.prepare import check_device, prepare
from samebits.measure.threads import in_process_reason

IN_PROCESS = {
    "repeat": repeat_axis,
    "seed": seed_axis,
    "state": state_axis,
    "threads": threads_axis,
    "batch": batch_axis,
    "layout": layout_axis,
}


def _validate(options: CheckOptions) -> None:
    unknown = [a for a in options.axes if a not in AXES]
    if unknown:
        raise UserError(f"unknown axis {', '.join(unknown)}; choose from {', '.join(AXES)}")
    if not options.axes:
        raise UserError(f"no axis to run; choose from {', '.join(AXES)}")
    if options.runs < 2:
        raise UserError(f"runs (--runs) must be >= 2 to compare runs, got {options.runs}")
    if options.processes < 2:
        raise UserError(f"processes (--processes) must be >= 2 to compare processes, got {options.processes}")
    if not options.batch_sizes:
        raise UserError("batch_sizes (--batch-sizes) must be positive integers, e.g. 1,2,4,8")
    for size in options.batch_sizes:
        batch_rows(size, "each of --batch-sizes")
    for t in options.threads or ():
        thread_count(t, "each of --threads")
    if options.timeout <= 0:
        raise UserError("timeout (--timeout) must be > 0 seconds")
    if options.batch_dim < 0:
        raise UserError(f"batch_dim (--batch-dim) must be >= 0, not {options.batch_dim}")
    check_device(options.device)
    check_device(options.device)
    if options.atol < 0 or options.rtol < 0:
        raise UserError(f"tolerances must be >= 0 (got atol={options.atol}, rtol={options.rtol})")


def _safe(axis: str, fn: Callable[[CheckContext], AxisResult], ctx: CheckContext) -> AxisResult:
    """Run one axis; an exception becomes an ``error`` verdict naming it."""
    try:
        return fn(ctx)
    except Exception as exc:
        return AxisResult(axis, "error", reason=first_line(exc, with_type=True))


_D = CheckOptions()  # the defaults, declared once (CheckOptions) and shown in the signature


def check(
    model_or_spec: ModelOrSpec,
    inputs: object = None,
    *,
    axes: tuple[str, ...] = _D.axes,
    runs: int = _D.runs,
    processes: int = _D.processes,
    threads: tuple[int, ...] | None = _D.threads,
    batch_sizes: tuple[int, ...] = _D.batch_sizes,
    batch_dim: int = _D.batch_dim,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = _D.seed,
    device: str = _D.device,
    dtype: str | None = _D.dtype,
    timeout: float = _D.timeout,
    localize: bool = _D.localize,
    runtime: str | None = _D.runtime,
    max_batch_size: int | None = _D.max_batch_size,
    progress: Callable[[str], None] | None = None,
    batch_invariant: bool | int = False,
) -> CheckReport:
    """Run ``model_or_spec`` under every variation that changes bits and report what changed.

    ``model_or_spec`` is a MODEL spec string, a :class:`LoadedModel` or an ``nn.Module``;
    ``inputs`` are example inputs (a tuple is positional, a dict keyword arguments) and default
    to the spec's own. ``axes`` choose the variations (repeat, seed, state, process, threads,
    batch, layout); ``runs``/``processes`` how many of each; ``threads`` the thread counts (default 1 and
    the current count); ``batch_sizes`` the sizes a sample is put in, along ``batch_dim``;
    ``atol``/``rtol`` a tolerance, both or neither (default: bits); ``timeout`` seconds per child process;
    ``localize`` whether to find the first divergent module; ``runtime`` ``"predictor"`` or
    ``"predictor:BACKEND"`` to run the axes through a Predictor (calibrated up to
    ``max_batch_size`` rows, in this process and in every child alike); ``batch_invariant`` every
    forward inside :func:`samebits.batch_invariant` (``True``, or its tile). The model's buffers,
    training flags and every global RNG are left as they were.
    """
    from samebits.runtime.batch_invariant import tiles_of

    start = time.monotonic()
    atol, rtol = check_tolerances(atol, rtol)
    opts = CheckOptions(
        axes=tuple(axes),
        runs=runs,
        processes=processes,
        threads=threads,
        batch_sizes=tuple(batch_sizes) or _D.batch_sizes,
        batch_dim=batch_dim,
        atol=atol,
        rtol=rtol,
        seed=seed,
        device=device,
        dtype=dtype,
        timeout=timeout,
        localize=localize,
        runtime=runtime,
        max_batch_size=max_batch_size,
        batch_invariant=tiles_of(batch_invariant, "eager"),
    )
    _validate(opts)
    say = progress or (lambda message: None)
    if isinstance(model_or_spec, str):
        say(f"loading {model_or_spec}")
    loaded = as_loaded(model_or_spec)
    with model_given_back(loaded.model):
        spec = spec_of(loaded)
        model_inputs = inputs_for(loaded, inputs)
        model, model_inputs = prepare(loaded.model, model_inputs, opts.device, opts.dtype)
        hookable = loaded.hookable
        predictor = None
        if opts.runtime:
            from samebits.runtime.as_model import parse_runtime, runtime_model

            parse_runtime(opts.runtime)
            say(f"building the {opts.runtime} runtime: measuring which batch sizes keep a row's bits (calibration)")
            with isolate_rng(opts.device):
                model = runtime_model(
                    model,
                    model_inputs,
                    opts.runtime,
                    max_batch_size=opts.max_batch_size,
                    device=opts.device,
                    batch_invariant=opts.batch_invariant,
                )
            predictor, hookable = model.predictor, False
        ctx = CheckContext(model, model_inputs, opts, spec, hookable, say, predictor.model if predictor else None)
        results: dict[str, AxisResult] = {}
        with (
            isolate_rng(opts.device),
            torch_env_kept(),
            model_state_kept(model) as reset,
            contextlib.ExitStack() as stack,
        ):
            if predictor is not None:
                stack.callback(predictor.close)
            elif opts.batch_invariant:
                from samebits.runtime.batch_invariant import batch_invariant_forwards

                stack.enter_context(batch_invariant_forwards(model, opts.batch_invariant))
            initial = state_digests(ctx.module) if "state" in opts.axes else {}
            check_forward(model, model_inputs, need_tensor=True)
            reset()  # buffers back; what the first forward changed beyond them stays changed
            ctx.first_forward_changed = changed_tensors(initial, state_digests(ctx.module)) if initial else []
            # Fresh interpreters only for what is fixed at start-up: the hash seed, the CPU's code
            # paths, and the thread count where set_num_threads cannot change it here. They start first and import torch
            # and load the model while the in-process axes run.
            in_children: list[str] = [a for a in ("process", "threads", "machine") if a in opts.axes]
            if "threads" in in_children and in_process_reason(opts.runtime) is None:
                in_children.remove("threads")
            children = stack.enter_context(ChildAxes(ctx, in_children))
            if in_children:
                children.start()
            for axis in [a for a in AXES if a in opts.axes and a in IN_PROCESS and a not in in_children]:
                say(f"axis {axis}")
                results[axis] = _safe(axis, IN_PROCESS[axis], ctx)
                reset()
            results.update(children.finish())

            def rerun(axis: str, condition: str) -> AxisResult:
                say(f"re-running {axis} with {'model.eval()' if condition == 'eval' else 'samebits.deterministic()'}")
                reset()
                try:
                    if condition == "eval":
                        eval_mode(model)
                        return _safe(axis, IN_PROCESS[axis], ctx)
                    with deterministic(opts.seed, device=opts.device):
                        return _safe(axis, IN_PROCESS[axis], ctx)
                finally:
                    reset()

            causes = diagnose(results, model, rerun)
        ordered = [results[a] for a in AXES if a in results]
        note = (
            None if loaded.hookable else f"localisation is unavailable: hooks cannot see inside a {loaded.kind} model"
        )
        if opts.runtime:
            note = f"ran through {opts.runtime}; localisation is unavailable there (hooks would see the Predictor's tiles, not these batches)"
        return CheckReport(
            loaded.spec,
            describe_inputs(model_inputs),
            ordered,
            causes,
            Fingerprint.capture().to_dict(),
            note,
            time.monotonic() - start,
        )
