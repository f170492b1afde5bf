"""``samebits bench``: per-sample loop, plain batched eager and the Predictor per backend,
invariant and not, measured side by side in one run."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import torch

from samebits.measure.model_state import model_given_back
from samebits.limits import batch_rows
from samebits.runtime.options import BenchOptions
from samebits.models import LoadedModel, ModelInputs
from samebits.models.target import ModelOrSpec, as_loaded, eval_mode, inputs_for, spec_of
from samebits.measure.batching import batch_size_of, concat_batches, output_row, random_neighbour, take_sample
from samebits.measure.processes import ChildJob, ChildRunner
from samebits.measure.load import LoadWatch
from samebits.measure.timing import Spread, Timings, interleaved_times
from samebits.measure.prepare import prepare
from samebits.tensors import tree
from samebits.tensors.compare import compare

SCHEMA_VERSION = 1
LOOP = "per-sample loop"
LOOP_SAMPLES = 8  # the loop's samples per round: its rate is per sample, timed beside every batch size


@dataclasses.dataclass
class BenchRow:
    config: str  # "per-sample loop", "eager", "predictor:eager", "predictor:eager (any size)", ...
    batch: int
    samples_per_s: float
    p50_ms: float
    p99_ms: float
    identical_to_reference: bool  # every row has the bits of the per-sample loop (eager, one sample)
    same_as_alone: bool  # every row has the bits this configuration gives the sample alone
    speedup_vs_loop: float
    peak_mb: float | None = None
    note: str = ""
    backend: str | None = None  # the Predictor's backend (None: the loop or plain eager)
    invariant: bool = False  # a Predictor with invariant=True
    rate: dict[str, Any] | None = None  # samples/s over the rounds: min, median, max, rounds
    speedup: dict[str, Any] | None = None  # vs loop, round by round (Ratio.to_dict); None for the loop


@dataclasses.dataclass
class BenchReport:
    model: str
    rows: list[BenchRow]
    invariance_cost: dict[str, float]  # backend -> invariant / any-size throughput at the largest batch (median)
    invariance: dict[str, list[int]]  # invariant config -> the batch sizes it verified and runs
    skipped: list[str]
    seconds: float
    schema_version: int = SCHEMA_VERSION
    plans: dict[str, str] = dataclasses.field(default_factory=dict)  # auto config -> which backend runs which size
    invariance_cost_spread: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # round by round
    load: dict[str, Any] | None = None  # the machine while the timings ran (Load.to_dict)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "kind": "bench"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


_D = BenchOptions()  # the defaults, declared once and shown in the signature


def bench(
    model_or_spec: ModelOrSpec,
    inputs: object = None,
    *,
    batch_sizes: tuple[int, ...] = _D.batch_sizes,
    backends: tuple[str, ...] = _D.backends,
    rounds: int = _D.rounds,
    budget: float = _D.budget,
    memory: bool = _D.memory,
    max_batch_size: int | None = _D.max_batch_size,
    cache_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
    device: str = _D.device,
) -> BenchReport:
    """Measure every configuration at every batch size, interleaved so noise hits all alike; the
    Predictors calibrate up to ``max_batch_size`` (default: the largest batch size benchmarked)."""
    from samebits.errors import UserError
    from samebits.runtime.backends import BACKENDS, BackendUnavailable
    from samebits.measure.guard import ForwardError, check_forward
    from samebits.runtime.predictor import Predictor

    start = time.monotonic()
    say = progress or (lambda message: None)
    loaded = as_loaded(model_or_spec)
    with model_given_back(loaded.model):
        example = inputs_for(loaded, inputs)
        unknown = [b for b in backends if b not in (*BACKENDS, "auto")]
        if unknown or not backends:
            raise UserError(
                f"unknown backend {', '.join(unknown) or '(none given)'}; choose from {', '.join(BACKENDS)} or auto"
            )
        if rounds < 1 or budget <= 0 or not batch_sizes or min(batch_sizes) < 1:
            raise UserError("rounds must be >= 1, budget > 0 and batch sizes positive")
        if batch_size_of(example) is None:
            raise UserError("bench needs example inputs with a batch dimension (dim 0)")
        cap = batch_rows(max_batch_size or max(batch_sizes), "max_batch_size")
        loaded.model, example = prepare(loaded.model, example, device)
        model = eval_mode(loaded.model)
        check_forward(model, example, need_tensor=True)
        sample = take_sample(example, 0)
        try:
            check_forward(model, sample)
        except ForwardError as exc:
            raise UserError(
                f"{exc} on one sample (row 0 of the example as a batch of 1); bench needs inputs whose dim 0 is the batch"
            ) from None
        gen = torch.Generator().manual_seed(0)
        pool = [sample] + [random_neighbour(sample, gen) for _ in range(max(batch_sizes) - 1)]
        with torch.inference_mode():
            reference = [tree.move(s.call(model), "cpu") for s in pool]  # the Predictors answer on the CPU
        predictors: dict[str, Any] = {}
        kinds: dict[str, tuple[str, bool]] = {}  # label -> (backend, invariant): never parsed back from the label
        skipped: list[str] = []
        for backend in backends:
            for invariant in (True, False):
                name = f"predictor:{backend}" + ("" if invariant else " (any size)")
                kinds[name] = (backend, invariant)
                say(f"building {name}")
                try:
                    predictors[name] = Predictor(
                        model,
                        device=device,
                        backend=backend,
                        invariant=invariant,
                        example_inputs=example,
                        deterministic=False,
                        cache_dir=cache_dir,
                        max_batch_size=cap,
                    )
                except (BackendUnavailable, UserError) as exc:
                    skipped.append(f"{name}: {exc}")
        with torch.inference_mode():
            alone = {"eager": reference, **{name: [p.predict(s) for s in pool] for name, p in predictors.items()}}
        rows: list[BenchRow] = []
        loop_seconds: list[float] = []
        measured: dict[int, Timings] = {}
        with LoadWatch() as watch:
            for n in batch_sizes:
                say(f"batch {n}")
                batch, loop = concat_batches(pool[:n]), pool[: min(n, LOOP_SAMPLES)]

                def eager() -> Any:
                    with torch.inference_mode():
                        return batch.call(model)

                def per_sample() -> Any:
                    with torch.inference_mode():
                        return [s.call(model) for s in loop]

                fns: dict[str, Callable[[], Any]] = {"eager": eager}
                fns.update({name: functools.partial(p.predict, batch) for name, p in predictors.items()})
                times = interleaved_times({LOOP: per_sample, **fns}, rounds, budget)
                loop_seconds += [t / len(loop) for t in times[LOOP]]
                measured[n] = times
                for name, fn in fns.items():
                    out = tree.move(fn(), "cpu")
                    same_loop = all(
                        compare(output_row(out, i, n), output_row(reference[i], 0, 1)).identical for i in range(n)
                    )
                    same_alone = all(
                        compare(output_row(out, i, n), output_row(alone[name][i], 0, 1)).identical for i in range(n)
                    )
                    median, speedup = times.median(name), times.ratio(LOOP, name, scale=n / len(loop))
                    rows.append(
                        BenchRow(
                            name,
                            n,
                            n / median,
                            median * 1e3,
                            _percentile(times[name], 0.99) * 1e3,
                            same_loop,
                            same_alone,
                            speedup.median,
                            backend=kinds.get(name, (None, False))[0],
                            invariant=kinds.get(name, (None, False))[1],
                            rate=times.rate(name, per_call=n).to_dict(),
                            speedup=speedup.to_dict(),
                        )
                    )
        loop_spread = Spread.of(loop_seconds)
        rows.insert(
            0,
            BenchRow(
                LOOP,
                1,
                1 / loop_spread.median,
                loop_spread.median * 1e3,
                _percentile(loop_seconds, 0.99) * 1e3,
                True,
                True,
                1.0,
                rate=Spread.of([1 / t for t in loop_seconds]).to_dict(),
            ),
        )
        if memory:
            _peaks(loaded, example, rows, cache_dir, cap, say, device)
        largest = measured[max(batch_sizes)]
        cost = {  # invariant / any-size throughput, round by round
            b: largest.ratio(f"predictor:{b} (any size)", f"predictor:{b}")
            for b in backends
            if f"predictor:{b}" in largest.seconds and f"predictor:{b} (any size)" in largest.seconds
        }
        for p in predictors.values():
            p.close()
        verified = {name: list(p.plan.sizes) for name, p in predictors.items() if p.plan.scheme != "off"}
        plans = {name: p.auto.describe() for name, p in predictors.items() if p.auto is not None}
        return BenchReport(
            loaded.spec,
            rows,
            {b: round(r.median, 3) for b, r in cost.items()},
            verified,
            skipped,
            round(time.monotonic() - start, 2),
            plans=plans,
            invariance_cost_spread={b: r.to_dict() for b, r in cost.items()},
            load=watch.load.to_dict(),
        )


def _peaks(
    loaded: LoadedModel,
    example: ModelInputs,
    rows: list[BenchRow],
    cache_dir: str | None,
    cap: int,
    say: Callable[[str], None],
    device: str = "cpu",
) -> None:
    """Peak memory of each configuration, each in a fresh child process (RSS only grows in one;
    on CUDA the device's allocated memory)."""
    with ChildRunner(
        loaded.model, example, spec=spec_of(loaded), seed=0, device=device, dtype=None, timeout=300
    ) as runner:
        if runner.skip_reason:
            for r in rows:
                r.note = f"peak memory not measured: {runner.skip_reason}"
            return
        say(f"peak memory of {len(rows)} configurations, one fresh process each")
        jobs = [
            ChildJob(
                f"{r.config}@{r.batch}",
                {},
                task="peak",
                params={
                    "config": r.config,
                    "backend": r.backend,
                    "invariant": r.invariant,
                    "batch": r.batch,
                    "cache_dir": cache_dir,
                    "max_batch_size": cap,
                    "device": device,
                },
            )
            for r in rows
        ]
        for r, result in zip(rows, runner.run(jobs, parallel=1)):
            if result.data is not None:
                r.peak_mb = round(result.data["peak_mb"], 1)
            else:
                r.note = f"peak memory: {result.error}"
