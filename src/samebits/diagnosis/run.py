"""``samebits.doctor()``: run the model, measure, and report the production mistakes found."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from samebits.measure.model_state import evaluating, model_given_back
from samebits.diagnosis.backends import BACKENDS, try_backends
from samebits.diagnosis.options import DoctorOptions
from samebits.diagnosis.report import DoctorFinding, DoctorReport, ProbeStatus
from samebits.errors import UserError, first_line
from samebits.rules import BY_CODE
from samebits.models import LoadedModel, ModelInputs
from samebits.models.target import ModelOrSpec, as_loaded, inputs_for, spec_of
from samebits.measure.memory import default_memory_cap_mb
from samebits.measure.guard import (
    ForwardError,
    check_forward,
    describe_inputs,
    model_state_kept,
    torch_env_kept,
    training_modules,
)
from samebits.measure.prepare import check_device, prepare
from samebits.measure.batching import batch_size_of, random_neighbour, stack_samples, take_sample
from samebits.measure.processes import ChildJob, ChildRunner
from samebits.measure.invariance import measure_batch_invariance
from samebits.measure.load import usable_cores
from samebits.measure.timing import Ratio, interleaved_times
from samebits.measure.trace import plain_forward
from samebits.tensors.tree import RowError
from samebits.tensors.tree import flatten


def _finding(
    code: str, severity: str, message: str, details: dict[str, Any] | None = None, fix: str | None = None
) -> DoctorFinding:
    rule = BY_CODE[code]
    return DoctorFinding(code, rule.name, severity, message, fix or rule.fix, details or {})  # type: ignore[arg-type]


def available_cores() -> int:
    """The cores this process may use (affinity, cgroup quota), as a whole number."""
    return max(1, round(usable_cores()))


OVERSUBSCRIBED = 1.5  # one thread this many times as fast as torch's count (median of the rounds)


class Skipped(Exception):
    """A probe that does not apply to this model, with the reason."""


class _Doctor:
    def __init__(
        self,
        loaded: LoadedModel,
        inputs: ModelInputs,
        spec: str | None,
        options: dict[str, Any],
        say: Callable[[str], None],
    ) -> None:
        self.loaded, self.model, self.inputs, self.spec, self.options, self.say = (
            loaded,
            loaded.model,
            inputs,
            spec,
            options,
            say,
        )
        self.findings: list[DoctorFinding] = []
        self.probes: list[ProbeStatus] = []
        self.details: dict[str, Any] = {}  # what the running probe measured

    def probe(self, name: str, fn: Callable[[], str]) -> None:
        """Run one probe; record what it measured, or why it was skipped or failed."""
        self.say(name)
        self.details = {}
        start = time.monotonic()
        try:
            summary, status = fn(), "ran"
        except Skipped as why:
            summary, status = str(why), "skipped"
        except Exception as exc:
            status, summary = "error", first_line(exc, with_type=True)
        self.probes.append(ProbeStatus(name, status, summary, round(time.monotonic() - start, 2), self.details))  # type: ignore[arg-type]

    def training_mode(self) -> str:
        if not isinstance(self.model, nn.Module):
            raise Skipped("not an nn.Module (a TorchScript or ONNX model has no training flags to read)")
        found = training_modules(self.model)
        if found:
            names = ", ".join(f"{n} ({t})" for n, t in found[:5]) + (
                f" and {len(found) - 5} more" if len(found) > 5 else ""
            )
            self.findings.append(
                _finding(
                    "SB151",
                    "error",
                    f"{len(found)} module(s) in training mode: {names}",
                    {"modules": [n for n, _ in found]},
                )
            )
        return f"{len(found)} training-sensitive module(s) in training mode"

    def grad(self) -> str:
        with torch.enable_grad():
            output = self.inputs.call(self.model)
        with_grad = [p for p, t in flatten(output).items() if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        params = sum(1 for p in self.model.parameters() if p.requires_grad) if isinstance(self.model, nn.Module) else 0
        if with_grad:
            self.findings.append(
                _finding(
                    "SB351",
                    "error",
                    f"outputs carry grad_fn ({', '.join(p or '<output>' for p in with_grad[:3])}): grad mode is on and {params} parameter tensor(s) require grad",
                    {"paths": with_grad},
                )
            )
        return f"outputs with grad_fn: {len(with_grad)}; parameters requiring grad: {params}"

    def memory(self) -> str:
        iterations, cap = self.options["iterations"], self.options["memory_cap_mb"]
        with ChildRunner(
            self.model,
            self.inputs,
            spec=self.spec,
            seed=0,
            device=self.options["device"],
            dtype=None,
            timeout=self.options["timeout"],
        ) as runner:
            if runner.skip_reason:
                raise Skipped(f"{runner.skip_reason}; pass a MODEL spec so that a fresh process can load it")
            jobs = [
                ChildJob(mode, {}, task="memory", params={"mode": mode, "iterations": iterations, "cap_mb": cap})
                for mode in ("as-is", "inference_mode")
            ]
            as_is, inference = runner.run(jobs)
        for r in (as_is, inference):
            if r.error:
                raise RuntimeError(f"{r.label}: {r.error}")
        a, b = as_is.data, inference.data
        assert a is not None and b is not None
        extra = a["grown_mb"] - b["grown_mb"]
        per_output = extra / max(a["iterations"], 1)
        self.details = {"as_is": a, "inference_mode": b, "retained_mb_per_output": round(per_output, 3)}
        text = f"kept outputs over {a['iterations']} forwards: as-is {a['grown_mb']:+.1f} MB, under inference_mode {b['grown_mb']:+.1f} MB"
        if a["capped"]:
            text += f" (stopped at the {cap:.0f} MB cap)"
        # Only a graph kept alive by grad_fn explains the extra memory; without one the
        # difference is allocator noise (freed memory that RSS does not give back at once).
        if a["carries_grad"] and (a["capped"] or extra > 0.5):
            self.findings.append(
                _finding("SB352", "error", text + f": {per_output:.2f} MB retained per kept output", self.details)
            )
        return text

    def batching(self) -> str:
        n = self.options["batch"]
        if batch_size_of(self.inputs) is None:
            raise Skipped("the inputs have no batch dimension")
        gen = torch.Generator().manual_seed(0)
        sample = take_sample(self.inputs, 0)
        samples = [sample] + [random_neighbour(sample, gen) for _ in range(n - 1)]
        batch = stack_samples(samples)

        def one_by_one() -> None:
            for s in samples:
                s.call(self.model)

        with torch.inference_mode():
            times = interleaved_times(
                {"one": one_by_one, "batched": lambda: batch.call(self.model)},
                rounds=5,
                budget=self.options["budget"],
                least=self.options["budget"] / 4,
            )
        speedup = times.ratio("one", "batched")
        rate_one, rate_batch = n / times.median("one"), n / times.median("batched")
        self.details = {"speedup": speedup.to_dict(), "samples_per_s": {"one": rate_one, "batched": rate_batch}}
        text = f"one sample at a time {rate_one:,.0f} samples/s; batched {n}: {rate_batch:,.0f} samples/s; speedup {speedup.text()}"
        if speedup.at_least(2.0):
            self.findings.append(
                _finding(
                    "SB251",
                    "warning",
                    f"batching {n} gives {speedup.text()} the throughput of one sample per forward ({rate_one:,.0f} -> {rate_batch:,.0f} samples/s)",
                    {"speedup": speedup.to_dict()},
                )
            )
        return text

    def batch_variance(self) -> str:
        if batch_size_of(self.inputs) is None:
            raise Skipped("the inputs have no batch dimension")
        sizes = [1, 2, 8, self.options["batch"]]
        try:
            measured = measure_batch_invariance(
                lambda b: plain_forward(self.model, b),
                take_sample(self.inputs, 0),
                sizes,
                neighbours_at={2, self.options["batch"]},
            )
        except RowError as exc:
            raise Skipped(f"outputs cannot be split per sample: {exc}") from None
        if measured.at(1).error or len(measured.measured) < 2:
            raise RuntimeError("; ".join(measured.errors) or "no batch size could run")
        result_summary = measured.summary()
        if not measured.differs:
            return result_summary
        self.findings.append(
            _finding(
                "SB152",
                "warning",
                f"a sample's bits change with the batch size: {result_summary}",
                {"groups": measured.groups()},
            )
        )
        return result_summary

    def threads(self) -> str:
        cores, threads = usable_cores(), torch.get_num_threads()
        pinned = {v: os.environ[v] for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if v in os.environ}
        text = f"torch uses {threads} intra-op thread(s) on {cores:g} usable core(s)" + (
            f"; {', '.join(f'{k}={v}' for k, v in pinned.items())}" if pinned else ""
        )
        fewer, oversubscribed, measured = self._fewer_threads(threads), False, ""
        if fewer is not None:
            load = f" ({fewer.load.describe()})" if fewer.load else ""
            text += f"; throughput on 1 thread against {threads}: {fewer.text(needs_quiet=False)}{load}"
            # half the rounds or more ran 1.5x as fast on one thread: the threads wait for each other
            oversubscribed = fewer.median >= OVERSUBSCRIBED
            measured = f": 1 thread ran {fewer.figures()} as fast{load}" if oversubscribed else ""
        if threads > cores or oversubscribed:
            self.findings.append(
                _finding(
                    "SB153",
                    "warning",
                    f"{threads} threads on {cores:g} cores: parallel ops fight for the cores{measured}",
                    {"threads": threads, "cores": cores, "one_thread_speedup": fewer.to_dict() if fewer else None},
                )
            )
        if not pinned:
            self.findings.append(
                _finding(
                    "SB154",
                    "info",
                    f"the thread count ({threads}) is not pinned before start (OMP_NUM_THREADS unset): another machine or container picks another count, and reductions other bits",
                    {"threads": threads, "cores": cores},
                )
            )
        return text

    def _fewer_threads(self, threads: int) -> Ratio | None:
        """How many times faster the example's forward runs on 1 thread than on ``threads``,
        round by round (the load is stated, never a reason to hide it: load is what makes
        threads fight), or ``None`` with one thread already."""
        if threads <= 1:
            return None
        with torch.inference_mode():
            start = time.perf_counter()
            self.inputs.call(self.model)
            # forwards per call: a thread pool woken after a switch costs its first forward
            # more, which a forward of microseconds would take for the thread count's own cost
            repeat = max(1, min(1000, int(0.005 / max(time.perf_counter() - start, 1e-6))))

        def at(n: int) -> Callable[[], object]:
            def run() -> object:
                torch.set_num_threads(n)
                try:
                    for _ in range(repeat):
                        self.inputs.call(self.model)
                finally:
                    torch.set_num_threads(threads)
                return None

            return run

        with torch.inference_mode():
            times = interleaved_times(
                {"many": at(threads), "one": at(1)},
                rounds=7,
                budget=self.options["budget"],
                least=self.options["budget"] / 2,
            )
        # throughput over runs of rounds: threads spinning on a taken core stall a forward now
        # and then, and the stalls are the cost (the median of single forwards hides them)
        ratio = times.ratio("many", "one", blocks=7)
        self.details = {"one_thread_speedup": ratio.to_dict()}
        return ratio

    def backends(self) -> str:
        names = tuple(self.options["backends"])
        if not names:
            raise Skipped("no backend asked for")
        if not isinstance(self.model, nn.Module) or isinstance(self.model, torch.jit.ScriptModule):
            raise Skipped("only an eager nn.Module can be converted here")
        modules = list(self.model.modules())
        training = any(m.training for m in modules)
        with evaluating(modules):  # backends export eval graphs: compare like with like
            results = try_backends(
                self.model,
                self.inputs,
                names,
                lambda: self.inputs.call(self.model),
                lambda fns: interleaved_times(
                    fns, rounds=7, budget=self.options["budget"], least=self.options["budget"] / 4
                ),
                device=self.options["device"],
            )
        parts = ["measured in eval mode (the model is in training mode)"] if training else []
        for r in results:
            if r["status"] != "ran":
                parts.append(f"{r['backend']} {r['status']} ({r['reason']})")
                continue
            bits = "identical bits" if r["identical"] else f"bits differ ({r['difference']})"
            speedup: Ratio = r.pop("ratio")
            parts.append(f"{r['backend']} speed against eager's: {speedup.text()}, {bits}")
            if speedup.at_least(1.2):
                self.findings.append(
                    _finding("SB252", "info", f"{r['backend']} runs {speedup.text()} faster than eager here, {bits}", r)
                )
        return "; ".join(parts)


_D = DoctorOptions()  # the defaults, declared once and shown in the signature


def doctor(
    model_or_spec: ModelOrSpec,
    inputs: object = None,
    *,
    device: str = _D.device,
    iterations: int = _D.iterations,
    memory_cap_mb: float | None = _D.memory_cap_mb,
    batch: int = _D.batch,
    backends: tuple[str, ...] = _D.backends,
    timeout: float = _D.timeout,
    budget: float = _D.budget,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Run the model as it is and measure: training mode, grad, memory growth (in child
    processes, capped), batching throughput, batch variance, threads, faster backends."""
    start = time.monotonic()
    if iterations < 1 or batch < 2:
        raise UserError("iterations (--iterations) must be >= 1 and batch (--batch) >= 2")
    if timeout <= 0 or budget <= 0 or (memory_cap_mb is not None and memory_cap_mb <= 0):
        raise UserError("timeout, budget and memory_cap_mb (--timeout, --budget, --memory-cap) must be > 0")
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise UserError(f"unknown backend {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")
    check_device(device)
    say = progress or (lambda message: None)
    loaded = as_loaded(model_or_spec)
    with model_given_back(loaded.model):
        spec = spec_of(loaded)
        model_inputs = inputs_for(loaded, inputs)
        loaded.model, model_inputs = prepare(loaded.model, model_inputs, device)
        options = {
            "device": device,
            "iterations": iterations,
            "memory_cap_mb": memory_cap_mb or default_memory_cap_mb(device),
            "batch": batch,
            "backends": backends,
            "timeout": timeout,
            "budget": budget,
        }
        d = _Doctor(loaded, model_inputs, spec, options, say)
        with torch_env_kept(), model_state_kept(loaded.model) as reset:
            d.probe(
                "training mode", d.training_mode
            )  # module flags only: a model that cannot run in train mode still gets it
            try:
                check_forward(loaded.model, model_inputs)
            except ForwardError as exc:
                if not d.findings:
                    raise
                d.probes.append(ProbeStatus("first forward", "error", str(exc), 0.0, {}))
                return _report(loaded, model_inputs, d, device, start)
            for name, fn in [
                ("grad on outputs", d.grad),
                ("memory growth", d.memory),
                ("batching throughput", d.batching),
                ("batch variance", d.batch_variance),
                ("threads", d.threads),
                ("backends", d.backends),
            ]:
                d.probe(name, fn)
                reset()
        return _report(loaded, model_inputs, d, device, start)


def _report(loaded: LoadedModel, model_inputs: ModelInputs, d: _Doctor, device: str, start: float) -> DoctorReport:
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(d.findings, key=lambda f: order[f.severity])
    env = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "cores": available_cores(),
        "device": device,
    }
    return DoctorReport(
        loaded.spec, describe_inputs(model_inputs), findings, d.probes, env, round(time.monotonic() - start, 2)
    )
