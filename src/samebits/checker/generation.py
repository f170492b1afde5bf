"""``samebits check MODEL --generate N``: where greedy generations part. For a model with a
transformers-style ``generate`` and prompts (``input_ids`` rows, with an ``attention_mask`` that
marks their padding), each prompt is generated alone (the reference), and again: alone
(``repeat``), inside one batch with every other prompt, padded to the longest (``batch``: on the
left, or the right for an encoder-decoder), alone with extra padding (``padding``), as batching
with longer prompts does, alone without
the KV cache (``cache``: every step recomputes the whole sequence), and alone with the other
attention implementation (``attention``: eager vs sdpa, where the model has both), and alone at
one thread (``threads``: against the reference's thread count), and alone in a fresh
interpreter (``process``: tokens and per-step score digests come back). With ``sample=True`` every
generation samples from a generator seeded the same way (``seed``). Per axis,
a verdict on the generated token ids and one on the per-step scores (bits); where two
generations part, the prompt, the step, the token position, the two tokens and the margin
between the reference's top two scores at that step (a small margin is why a last-bit
difference flipped the argmax). Every axis that differs is localised to the first module whose
output differs in that step's forward and gets a cause measured by controlled re-runs
(``generation_causes``)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from typing import Any

import torch

from samebits.checker.generation_causes import EXPLAIN, Ctx, process_cause
from samebits.checker.generation_site import Site, last_position_of_row
from samebits.checker.report import Cause
from samebits.errors import UserError, first_line
from samebits.exit_codes import exit_code
from samebits.measure.generate import Generator, Side, attention, step_digests
from samebits.measure.generate import padding_side as padding_side_of
from samebits.models.target import ModelOrSpec, as_loaded, eval_mode, inputs_for
from samebits.models.inputs import Model, ModelInputs

AXES = ("repeat", "batch", "padding", "cache", "attention", "threads", "process")
SCHEMA_VERSION = 1


@dataclasses.dataclass
class Parting:
    """The first step where a prompt's generation differs from its reference."""

    prompt: int
    step: int  # 0 = the first generated token
    position: int  # the token's position in the sequence (prompt length + step)
    reference_token: int
    other_token: int
    margin: float  # top-1 minus top-2 score at that step in the reference run
    module: str | None = None  # the first module whose output differed in that step's forward
    module_type: str | None = None
    module_note: str = ""  # how it was found, or why it could not be


@dataclasses.dataclass
class GenerationAxis:
    axis: str
    tokens: str  # "identical" | "diverged" | "skipped" | "error" (the summary says why)
    scores: str  # the same verdicts, on the bits of every step's scores
    prompts: int
    parted: list[Parting]
    first_score_difference: dict[str, Any] | None  # prompt, step, max_abs where scores first differ
    summary: str = ""


@dataclasses.dataclass
class GenerationReport:
    model: str
    prompts: list[int]  # prompt lengths
    max_new_tokens: int
    axes: list[GenerationAxis]
    fingerprint: dict[str, Any]
    seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION
    sampling: dict[str, Any] | None = None  # {"seed": S} with --sample; None: greedy
    padding_side: str = "left"  # where prompts were padded: right for an encoder-decoder, left otherwise
    causes: list[Cause] = dataclasses.field(default_factory=list)  # one per axis that differs, measured

    @property
    def ran(self) -> list[GenerationAxis]:
        return [a for a in self.axes if a.tokens in ("identical", "diverged")]

    @property
    def differs(self) -> bool:
        return any("diverged" in (a.tokens, a.scores) for a in self.axes)

    @property
    def errored(self) -> list[GenerationAxis]:
        return [a for a in self.axes if a.tokens == "error"]

    @property
    def ok(self) -> bool:
        return not self.differs and not self.errored and bool(self.ran)

    @property
    def exit_code(self) -> int:
        return exit_code(found=self.differs, errored=bool(self.errored), ran=bool(self.ran))

    def headline(self) -> str:
        parted = [a for a in self.axes if a.tokens == "diverged"]
        if parted:
            p = parted[0].parted[0]
            return (
                f"Generations part across {', '.join(a.axis for a in parted)}: prompt {p.prompt} at step {p.step} "
                f"(token {p.reference_token} vs {p.other_token}, reference margin {p.margin:.3g})"
            )
        scored = [a.axis for a in self.axes if a.scores == "diverged"]
        if scored:
            return f"Same tokens on every axis; the scores' bits change across {', '.join(scored)}"
        if self.errored:
            return f"The {', '.join(a.axis for a in self.errored)} axis could not run: {self.errored[0].summary}"
        if not self.ran:
            return "Nothing was checked: every axis was skipped"
        return "Same tokens and the same score bits on every axis"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(kind="check-generate", ok=self.ok, exit_code=self.exit_code, headline=self.headline())
        return data


def _prompts(example: ModelInputs) -> list[torch.Tensor]:
    """The prompts of the example: its ``input_ids`` rows without the padding its mask marks."""
    kwargs = dict(example.kwargs)
    ids = kwargs.get("input_ids", example.args[0] if example.args else None)
    audio = next((k for k in ("input_features", "input_values") if k in kwargs), None)
    if audio and ids is None:
        raise UserError(
            f"--generate covers token prompts (input_ids); this model takes {audio} (audio): frames have no "
            "tokens to pad or batch by length, so the generation axes do not apply; check its forward without --generate"
        )
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise UserError("--generate needs inputs with input_ids [prompts, length] (and an attention_mask)")
    mask = kwargs.get("attention_mask")
    mask = torch.ones_like(ids) if mask is None else mask
    prompts = [ids[i][mask[i].bool()] for i in range(ids.shape[0])]
    if any(len(p) == 0 for p in prompts):
        raise UserError("--generate: a prompt is empty (its attention_mask is all zeros)")
    return prompts


class _Skip(Exception):
    pass


def _with_other_attention(model: Model, run: Any) -> Any:
    """``run()`` with the model on the other attention implementation (eager <-> sdpa), put back after."""
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if current not in ("eager", "sdpa") or not callable(getattr(model, "set_attn_implementation", None)):
        raise _Skip(f"the model's attention implementation ({current}) has no eager/sdpa alternative here")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(attention(model, "eager" if current == "sdpa" else "sdpa"))
        except UserError as exc:
            raise _Skip(str(exc)) from None
        return run()


def _at_one_thread(run: Any) -> Any:
    """``run()`` at one intra-op thread (the reference ran at the current count), put back after."""
    from samebits.measure.threads import num_threads

    if torch.get_num_threads() == 1:
        raise _Skip("the reference already runs at 1 thread (torch.get_num_threads() == 1): nothing to compare")
    with num_threads(1):
        return run()


def _step_calls(calls: list[Any], step: int) -> list[Any]:
    """The module calls of the model's ``step``-th forward (completion order: a forward's calls
    end with the model's own)."""
    out, current = [], 0
    for call in calls:
        if current == step:
            out.append(call)
        if call.name == "":
            current += 1
        if current > step:
            break
    return out


def _localise(model: Model, site: Site) -> str:
    """Fill in ``site``'s module: the first whose output differs at the site's step between its
    reference run and its other run; return how it was found, or why it could not be."""
    from samebits.measure.trace import Trace, first_divergence, module_hooks

    if not isinstance(model, torch.nn.Module):
        return "not localised: hooks need an nn.Module"
    traces = []
    for (run, n, row), last_token in ((site.reference, None), (site.other, site.last_token)):
        with module_hooks(model, last_position_of_row(n, row, last_token)) as (calls, _):
            run()
        traces.append(Trace({}, _step_calls(list(calls), site.step)))
    found = first_divergence(*traces)
    if found is None:
        return "not localised: no module's output differed at the prompt's last position in that step"
    site.module, site.module_type, site.call = found.call.name, found.call.type, found.call.call
    site.inputs_identical = found.inputs_identical
    innermost = next(call for call, differs in found.calls if differs)
    if innermost.key != found.call.key:
        site.first_output = f"{innermost.name or '<model>'} ({innermost.type})"
    how = "compared at the prompt's last position"
    if not found.inputs_identical:
        how += "; its inputs differed too (the KV cache of a longer, padded sequence, or code between modules)"
    return how


def _in_a_fresh_process(
    loaded: Any, example: Any, prompts: list[torch.Tensor], n: int, seed: int | None, side: str
) -> list[tuple[torch.Tensor, list[str]]]:
    """Each prompt generated alone in a fresh interpreter: (tokens, per-step score digests)."""
    from samebits.measure.processes import ChildJob, ChildRunner
    from samebits.models.target import spec_of

    with ChildRunner(
        loaded.model, example, spec=spec_of(loaded), seed=0, device="cpu", dtype=None, timeout=600
    ) as runner:
        if runner.skip_reason:
            raise _Skip(runner.skip_reason)
        params = {"prompts": [p.tolist() for p in prompts], "max_new_tokens": n, "seed": seed, "side": side}
        (result,) = runner.run([ChildJob("process", {}, task="generate", params=params)])
    if result.error or result.data is None:
        raise _Skip(f"the fresh process failed: {result.error}")
    return [(torch.tensor(t, dtype=torch.long), d) for t, d in zip(result.data["tokens"], result.data["digests"])]


def _first_score_difference(i: int, s0: torch.Tensor, other: Any) -> dict[str, Any] | None:
    """Where prompt ``i``'s scores first differ from ``s0``: ``other`` is the other run's scores,
    or its per-step digests (from another process: then no size is known)."""
    if isinstance(other, list):
        mine = step_digests(s0)
        step = next((k for k in range(len(mine)) if k >= len(other) or mine[k] != other[k]), None)
        return None if step is None else {"prompt": i, "step": step, "max_abs": None}
    if torch.equal(s0, other):
        return None
    step = next(k for k in range(len(s0)) if not torch.equal(s0[k], other[k]))
    diff = (s0[step] - other[step]).abs()
    finite = diff[torch.isfinite(diff)]  # masked tokens are -inf in both
    return {"prompt": i, "step": step, "max_abs": float(finite.max()) if finite.numel() else float("inf")}


def _compare(axis: str, prompts: list[torch.Tensor], ref: list, other: list) -> GenerationAxis:
    parted, first_score = [], None
    for i, ((t0, s0), (t1, s1)) in enumerate(zip(ref, other)):
        if first_score is None:
            first_score = _first_score_difference(i, s0, s1)
        if not torch.equal(t0, t1):
            step = next(k for k in range(len(t0)) if t0[k] != t1[k])
            top = torch.topk(s0[step], 2).values
            parted.append(
                Parting(i, step, len(prompts[i]) + step, int(t0[step]), int(t1[step]), float(top[0] - top[1]))
            )
    tokens = "diverged" if parted else "identical"
    scores = "diverged" if first_score else "identical"
    summary = f"{len(prompts) - len(parted)}/{len(prompts)} prompts generate the same tokens" + (
        f"; the scores' bits differ from step {first_score['step']} of prompt {first_score['prompt']}"
        if first_score
        else ""
    )
    return GenerationAxis(axis, tokens, scores, len(prompts), parted, first_score, summary)


def check_generation(
    model_or_spec: ModelOrSpec,
    inputs: object = None,
    *,
    max_new_tokens: int = 8,
    axes: tuple[str, ...] = AXES,
    padding: int = 3,
    sample: bool = False,
    seed: int = 0,
    padding_side: str | None = None,
) -> GenerationReport:
    """Generate each prompt alone, then across ``axes`` (repeat, batch, padding by ``padding``
    extra tokens, ...), for ``max_new_tokens`` steps, greedily or (``sample``) sampling with the
    RNG seeded ``seed`` before every generation, and say where generations part. Prompts are
    padded on ``padding_side`` ("left" or "right"; default: the right for an encoder-decoder,
    the left otherwise)."""
    from samebits.fingerprint import Fingerprint

    started = time.monotonic()
    if max_new_tokens < 1:
        raise UserError("--generate N needs N >= 1 new tokens")
    if padding_side not in (None, "left", "right"):
        raise UserError(f"--padding-side is left or right (got {padding_side!r})")
    unknown = [a for a in axes if a not in AXES]
    if unknown:
        raise UserError(f"unknown generation axis {unknown[0]!r}; choose from {', '.join(AXES)}")
    loaded = as_loaded(model_or_spec)
    example = inputs_for(loaded, inputs)
    prompts = _prompts(example)
    side: Side = padding_side_of(loaded.model)
    if padding_side is not None:
        side = "left" if padding_side == "left" else "right"
    generate = Generator(eval_mode(loaded.model), max_new_tokens, seed if sample else None, side)
    reference = [generate([p])[0] for p in prompts]  # as the model is, like check's forward axes
    runs = {
        "repeat": lambda: [generate([p])[0] for p in prompts],
        "batch": lambda: generate(prompts),
        "padding": lambda: [generate([p], extra=padding)[0] for p in prompts],
        "cache": lambda: [generate([p], use_cache=False)[0] for p in prompts],
        "attention": lambda: _with_other_attention(generate.model, lambda: [generate([p])[0] for p in prompts]),
        "threads": lambda: _at_one_thread(lambda: [generate([p])[0] for p in prompts]),
        "process": lambda: _in_a_fresh_process(loaded, example, prompts, max_new_tokens, generate.seed, side),
    }
    one = {  # one prompt's other run, to localise where it differs: (run, rows in that run, its row)
        "repeat": lambda i: (lambda: generate([prompts[i]]), 1, 0),
        "batch": lambda i: (lambda: generate(prompts), len(prompts), i),
        "padding": lambda i: (lambda: generate([prompts[i]], extra=padding), 1, 0),
        "cache": lambda i: (lambda: generate([prompts[i]], use_cache=False), 1, 0),
        "attention": lambda i: (lambda: _with_other_attention(generate.model, lambda: generate([prompts[i]])), 1, 0),
        "threads": lambda i: (lambda: _at_one_thread(lambda: generate([prompts[i]])), 1, 0),
    }
    ctx = Ctx(generate.model, generate, prompts, reference, padding, _with_other_attention, _at_one_thread)
    results: list[GenerationAxis] = []
    causes: list[Cause] = []
    for axis in axes:
        try:
            result = _compare(axis, prompts, reference, runs[axis]())
        except _Skip as exc:
            results.append(GenerationAxis(axis, "skipped", "skipped", len(prompts), [], None, str(exc)))
            continue
        except Exception as exc:  # one axis that cannot run does not end the check
            results.append(
                GenerationAxis(axis, "error", "error", len(prompts), [], None, first_line(exc, with_type=True))
            )
            continue
        if axis == "padding":
            why = " (encoder-decoder)" if side == "right" and padding_side is None else ""
            result.summary += f" ({padding} more pad tokens on the {side}{why})"
        results.append(result)
        if result.tokens == "identical" and result.scores == "identical":
            continue
        # where: the first parting, else where the scores' bits first move; localised and explained
        first = result.parted[0] if result.parted else None
        moved = result.first_score_difference or {"prompt": 0, "step": 0}
        prompt, step = (first.prompt, first.step) if first else (moved["prompt"], moved["step"])
        if axis not in one:
            if first:
                first.module_note = "not localised: the other run was in another process"
            repeats = next((a for a in results if a.axis == "repeat"), None)
            if axis == "process" and (repeats is None or repeats.scores == "identical"):
                agree = "; generations repeated in this process agree" if repeats else ""
                causes.append(process_cause(f"at prompt {prompt}, step {step}, in a fresh interpreter{agree}"))
            continue
        alone = functools.partial(generate, [prompts[prompt]])
        site = Site(axis, prompt, step, (alone, 1, 0), one[axis](prompt))
        width = {"batch": max(len(p) for p in prompts), "padding": len(prompts[prompt]) + padding}.get(axis)
        if side == "right" and width:
            site.last_token = (width, len(prompts[prompt]) - 1)
        note = _localise(generate.model, site)
        if first:
            first.module = None if site.module is None else site.label
            first.module_type, first.module_note = site.module_type, note
        causes.append(EXPLAIN[axis](ctx, site))
    return GenerationReport(
        loaded.spec,
        [len(p) for p in prompts],
        max_new_tokens,
        results,
        Fingerprint.capture().to_dict(),
        time.monotonic() - started,
        sampling={"seed": seed} if sample else None,
        padding_side=side,
        causes=causes,
    )
