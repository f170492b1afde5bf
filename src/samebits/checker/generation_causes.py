"""Causes of the differences ``check --generate`` finds, each measured by a controlled re-run:
the module where that step's forward first differs is re-run alone on the inputs it had in the
two runs (and, when it works row by row, on the one row of interest at other row counts: its
row-count classes at that shape); whole generations are re-run with one factor changed at a
time (the batch's rows without its padding, its padding without its rows, the batch's shape
with only copies of the prompt); and the fix is named, verified where a re-run can show it."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from samebits.checker.report import Cause
from samebits.measure.invariance import format_groups
from samebits.rules.causes import fix_of
from samebits.tensors import tree
from samebits.tensors.digest import RUN_DIGEST, leaf_digest

Run = tuple[Callable[[], Any], int, int]  # (run the generation, rows in it, the prompt's row)
MAX_ROWS = 4096  # the row-count re-run tries at most this many rows


@dataclasses.dataclass
class Site:
    """Where an axis's generations first differ: the prompt, the step, the two runs, and the
    module call found first there (``module`` the dotted name, ``call`` its call index in the
    run, ``inputs_identical`` whether its inputs at the prompt's last position were equal)."""

    axis: str
    prompt: int
    step: int
    reference: Run
    other: Run
    module: str | None = None
    module_type: str | None = None
    call: int = 0
    inputs_identical: bool = False
    first_output: str | None = None  # the first module call whose output differs, when not ``module``
    # right padding: in the other run, tensors as wide as its input (``[0]``) are read at the
    # prompt's last token (``[1]``), not at the last position (a pad)
    last_token: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        return self.module or "<model>"

    @property
    def start(self) -> str:
        """Where the difference starts, as a clause for a cause's summary."""
        if self.module is None:
            return ""
        if self.first_output or not self.inputs_identical:
            inner = self.first_output or f"{self.label} ({self.module_type})"
            parent = inner.split(" ")[0].rpartition(".")[0] or "the model"
            return f", starting inside {parent}, between its modules (the first module output to differ is {inner}'s)"
        return f", starting in {self.label} ({self.module_type})"

    @property
    def where(self) -> str:
        at = f"prompt {self.prompt}, step {self.step}"
        if self.module is None:
            return at
        how = "with identical inputs" if self.inputs_identical else "its inputs differing too"
        inner = f" (the first module output to differ is {self.first_output}'s)" if self.first_output else ""
        return f"{at}: first in {self.label} ({self.module_type}), {how}{inner}"


def last_position_of_row(n: int, i: int, last_token: tuple[int, int] | None = None) -> Callable[[Any], Any]:
    """A selection: row ``i`` of tensors whose leading dim is ``n`` and, of those with a sequence
    dim (2-D and up), the last position only, the one the next token is read from: the same in a
    prompt run alone and left-padded inside a batch. ``last_token`` (width, index): tensors that
    wide are read at that index instead (a right-padded encoder input's last token)."""

    def one(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 0 or t.shape[0] != n:
            return t
        t = t[i : i + 1]
        if t.dim() < 2 or t.shape[1] == 0:
            return t
        at = last_token[1] if last_token and t.shape[1] == last_token[0] else t.shape[1] - 1
        return t[:, at : at + 1]

    return lambda obj: tree.map_tensors(one, obj)


@contextlib.contextmanager
def _pre_hook(module: torch.nn.Module, hook: Callable[..., None]) -> Iterator[None]:
    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def captured_call(model: torch.nn.Module, run: Callable[[], Any], name: str, call: int) -> tuple | None:
    """A deep copy of the ``(args, kwargs)`` call ``call`` of module ``name`` received during
    ``run()``; ``None`` when that call did not happen or its inputs cannot be copied."""
    module = dict(model.named_modules()).get(name)
    if module is None:
        return None
    seen: list[tuple | None] = []
    count = [0]

    def hook(mod: Any, args: Any, kwargs: Any) -> None:
        if count[0] == call:
            try:  # deep: a KV cache among the inputs is updated in place by the call
                seen.append(copy.deepcopy((args, dict(kwargs))))
            except Exception:  # inputs that cannot be copied: the module is not re-run alone
                seen.append(None)
        count[0] += 1

    with _pre_hook(module, hook):
        run()
    return seen[0] if seen else None


def _row_input(captured: tuple | None) -> torch.Tensor | None:
    """The one ``[rows, positions, features]`` tensor a row-wise module (Linear, a norm, an MLP)
    was called with, else None."""
    if captured is None:
        return None
    args, kwargs = captured
    if len(args) != 1 or any(v is not None for v in kwargs.values()):
        return None
    x = args[0]
    return x if isinstance(x, torch.Tensor) and x.dim() == 3 and x.is_floating_point() else None


def _selected(obj: Any, n: int, row: int, last_token: tuple[int, int] | None = None) -> list[torch.Tensor]:
    picked = last_position_of_row(n, row, last_token)(obj)
    try:
        return [t for t in tree.flatten(picked).values() if isinstance(t, torch.Tensor)]
    except tree.TreeError:
        return []


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


@dataclasses.dataclass
class ModuleRerun:
    """The module found first, re-run alone on each run's inputs: whether that reproduces the
    difference at the prompt's row, and (a row-wise module) the row-count classes of that row."""

    reproduced: bool | None  # None: it could not be re-run alone (inputs that cannot be copied)
    how: str = "on each run's inputs"
    rows: tuple[int, int] | None = None  # rows the module saw in the reference call and the other
    classes: str = ""  # "{1} {2..8}": n whose call gives the row (last of n copies) the same bits
    copies_reproduce: bool | None = None  # copies of the row at each call's count and place give both runs' bits

    def text(self, module: str) -> str:
        if self.reproduced is None:
            return f"{module} could not be re-run alone on its captured inputs"
        if not self.reproduced:
            return f"re-run alone {self.how}, {module} gives the same bits at the prompt's row"
        out = f"re-run alone {self.how}, {module} reproduces the difference at the prompt's row"
        if not self.rows:
            return out
        a, b = self.rows
        out += f" ({_rows(a)} in the reference call, {_rows(b)} in the other); the row last among n copies of itself, n that agree bit for bit: {self.classes}"
        if self.copies_reproduce is None:
            return out
        return out + (
            "; copies of the row at each call's row count and place give both runs' bits: the call's shape decides them, not the other rows"
            if self.copies_reproduce
            else "; copies of the row at each call's row count and place do not give both runs' bits: the other rows' values matter too"
        )


def _rows(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


def _apply(module: torch.nn.Module, captured: tuple) -> Any:
    """The module called on a fresh copy of captured inputs (the call may update a cache in them)."""
    args, kwargs = copy.deepcopy(captured)
    with torch.inference_mode():
        return module(*args, **kwargs)


def rerun_module(
    model: torch.nn.Module,
    site: Site,
    condition: Callable[[Callable[[], Any]], Any] | None = None,
    condition_text: str = "",
) -> ModuleRerun:
    """Re-run the site's module alone: on the reference run's call inputs and on the other run's
    (or, with ``condition``, on the reference's inputs again under that condition: one thread,
    the other attention implementation, nothing changed for a repeat)."""
    name = site.module
    module = None if name is None else dict(model.named_modules()).get(name)
    if name is None or module is None:
        return ModuleRerun(None)
    (run_a, n_a, row_a), (run_b, n_b, row_b) = site.reference, site.other
    ref = captured_call(model, run_a, name, site.call)
    other = ref if condition is not None else captured_call(model, run_b, name, site.call)
    if ref is None or other is None:
        return ModuleRerun(None)
    try:
        a = _selected(_apply(module, ref), n_a, row_a)
        if condition is not None:
            b = _selected(condition(lambda: _apply(module, ref)), n_a, row_a)
        else:
            b = _selected(_apply(module, other), n_b, row_b, site.last_token)
    except Exception:  # a module that cannot run outside its parent's forward
        return ModuleRerun(None)
    how = f"on the reference's inputs, as it is and {condition_text}" if condition else "on each run's inputs"
    result = ModuleRerun(not _same(a, b), how)
    x_ref, x_other = _row_input(ref), _row_input(other)
    if condition is None and result.reproduced and x_ref is not None and x_other is not None:
        _row_counts(module, x_ref, x_other, ((n_a, row_a), (n_b, row_b)), a, b, result, site.last_token)
    return result


def _row_counts(
    module: torch.nn.Module,
    x_ref: torch.Tensor,
    x_other: torch.Tensor,
    rows: tuple[tuple[int, int], tuple[int, int]],
    a: list[torch.Tensor],
    b: list[torch.Tensor],
    result: ModuleRerun,
    last_token: tuple[int, int] | None = None,
) -> None:
    """The prompt's row (its last position) among n copies of itself: which n give it the same
    bits (read last), and whether copies at each call's row count and place give both runs' bits."""
    (n_a, row_a), (n_b, row_b) = rows
    if x_ref.shape[0] != n_a or x_other.shape[0] != n_b:  # not [rows, positions, features]
        return
    width = x_ref.shape[-1]
    one = x_ref[row_a, -1].reshape(1, width)
    count_a, count_b = x_ref.numel() // width, x_other.numel() // width
    last_b = last_token[1] if last_token and x_other.shape[1] == last_token[0] else x_other.shape[1] - 1
    place_a, place_b = (row_a + 1) * x_ref.shape[1] - 1, row_b * x_other.shape[1] + last_b  # in the call's rows
    top = min(max(count_a, count_b), MAX_ROWS)
    sizes = sorted({*range(1, min(8, top) + 1), *(2**k for k in range(top.bit_length())), min(count_a, top), top})

    def among(n: int, place: int) -> torch.Tensor | None:
        y = module(one.expand(n, width).contiguous()[:, None, :])
        return y[place].reshape(1, 1, -1) if isinstance(y, torch.Tensor) and y.shape[0] == n else None

    groups: dict[str, list[int]] = {}
    with torch.inference_mode():
        try:
            for n in sizes:
                y = among(n, n - 1)
                if y is None:
                    return
                groups.setdefault(leaf_digest(y.contiguous(), RUN_DIGEST), []).append(n)
            tried = max(count_a, count_b) <= MAX_ROWS and len(a) == len(b) == 1
            again = [among(count_a, place_a), among(count_b, place_b)] if tried else []
        except Exception:  # a module that is not row-wise after all: no row-count classes
            return
    result.rows = (count_a, count_b)
    result.classes = format_groups(list(groups.values()), sizes)
    if again and again[0] is not None and again[1] is not None:
        result.copies_reproduce = torch.equal(again[0].reshape(a[0].shape), a[0]) and torch.equal(
            again[1].reshape(b[0].shape), b[0]
        )


@dataclasses.dataclass
class Ctx:
    """What the causes re-run: the model, the generator (``measure.generate.Generator``), the
    prompts, each prompt's reference (tokens, scores) and the check's options."""

    model: Any
    generate: Any
    prompts: list[torch.Tensor]
    reference: list[tuple[torch.Tensor, torch.Tensor]]
    padding: int
    with_other_attention: Callable[[Any, Any], Any]
    at_one_thread: Callable[[Any], Any]


def _same_generation(x: tuple[torch.Tensor, torch.Tensor], y: tuple[torch.Tensor, torch.Tensor]) -> bool:
    return torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])


def _differs(flag: bool) -> str:
    return "differs" if flag else "keeps the reference's bits"


def _module_part(
    ctx: Ctx, site: Site, condition: Any = None, condition_text: str = ""
) -> tuple[str, ModuleRerun | None]:
    """The module re-run and its evidence; none where the module's own inputs differed (the
    difference began in code between modules: re-running it would only show that other inputs
    give other bits)."""
    if site.module is None or not isinstance(ctx.model, torch.nn.Module):
        return "", None
    if not site.inputs_identical and condition is None:
        return "", None
    rerun = rerun_module(ctx.model, site, condition, condition_text)
    return "; " + rerun.text(site.label), rerun


def batch_cause(ctx: Ctx, site: Site) -> Cause:
    """The batch's two factors re-run one at a time (its rows, its padding), then its shape with
    only copies of the prompt: equal to the batch's bits when shape alone decides them."""
    gen, p = ctx.generate, ctx.prompts[site.prompt]
    rows, width = len(ctx.prompts), max(len(q) for q in ctx.prompts)
    ref = ctx.reference[site.prompt]
    padded = gen([p], extra=width - len(p))[0]
    copies = gen([p] * rows)[0]
    tile = observed(ctx.model, lambda: gen([p] * rows, extra=width - len(p)))
    in_batch = observed(ctx.model, site.other[0])
    by_rows, by_padding = not _same_generation(copies, ref), not _same_generation(padded, ref)
    shape_decides = _same_generation(tile.output[0], in_batch.output[site.prompt])
    masks = (tile.mask, in_batch.mask)
    by_mask = not shape_decides and (masks[0] is None) != (masks[1] is None)
    side = gen.side
    factors = [f for f, on in (("the number of rows", by_rows), (f"the {side} padding", by_padding)) if on]
    if by_mask:
        factors.append("whether any prompt in the batch is padded (its layers then get an attention mask)")
    elif not shape_decides:
        factors.append("the other prompts in it")
    factors = factors or ["its rows and its padding together"]
    summary = f"a prompt's generation depends on the batch it runs in: {', '.join(factors)}" + site.start
    module_text, _ = _module_part(ctx, site)
    evidence = (
        f"at {site.where}; the prompt alone, {side}-padded to the batch's width ({width}): {_differs(by_padding)}; "
        f"{rows} copies of it, unpadded: {_differs(by_rows)}; {rows} copies at the batch's width "
        + ("give exactly its bits inside the batch" if shape_decides else "still differ from its bits inside the batch")
        + (
            f" (the layers' attention mask: {masks[1] or 'none'} inside the batch, {masks[0] or 'none'} among the copies)"
            if by_mask
            else ""
        )
        + module_text
    )
    code = "batch-size" if by_rows else "padding" if by_padding else "batch-composition"
    fix = fix_of(code, None if code == "batch-composition" else "generate")
    return Cause(code, "batch", summary, evidence, fix, verified=True if shape_decides else None)


@dataclasses.dataclass
class Observed:
    """One run of a generation, with what its forwards received: the model's ``position_ids``
    per forward, and the attention mask its layers got in the first forward (the first module
    given a 4-D mask or none, not the 2-D padding mask the model takes): ``None`` when they got
    none (transformers drops a mask that masks nothing), else its dtype and shape."""

    output: Any
    position_ids: list[Any]
    mask: str | None

    def positions(self, step: int, n: int, row: int) -> torch.Tensor | None:
        """The position ids of forward ``step`` at row ``row`` of ``n``, where they were passed."""
        ids = self.position_ids[step] if step < len(self.position_ids) else None
        return ids[row] if isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[0] == n else None


def observed(model: Any, run: Callable[[], Any]) -> Observed:
    """``run()`` once, watched (nothing is watched in a model that is not an ``nn.Module``)."""
    if not isinstance(model, torch.nn.Module):
        return Observed(run(), [], None)
    positions: list[Any] = []
    masks: list[Any] = []

    def top(mod: Any, args: Any, kwargs: Any) -> None:
        positions.append(kwargs.get("position_ids"))

    def inner(mod: Any, args: Any, kwargs: Any) -> None:
        mask = kwargs.get("attention_mask", 0)
        if not masks and (mask is None or (isinstance(mask, torch.Tensor) and mask.dim() == 4)):
            masks.append(None if mask is None else f"{str(mask.dtype).removeprefix('torch.')} {list(mask.shape)}")

    handles = [model.register_forward_pre_hook(top, with_kwargs=True)]
    handles += [m.register_forward_pre_hook(inner, with_kwargs=True) for name, m in model.named_modules() if name]
    try:
        output = run()
    finally:
        for handle in handles:
            handle.remove()
    return Observed(output, positions, masks[0] if masks else None)


def _score_gap(x: tuple[torch.Tensor, torch.Tensor], y: tuple[torch.Tensor, torch.Tensor]) -> float | None:
    """The largest score difference between two generations (finite scores), ``None`` for the
    same bits."""
    if _same_generation(x, y):
        return None
    if not torch.equal(x[0], y[0]) or x[1].shape != y[1].shape:
        return float("inf")  # other tokens: the scores after them are not comparable
    diff = (x[1] - y[1]).abs()
    finite = diff[torch.isfinite(diff)]
    return float(finite.max()) if finite.numel() else 0.0


def _gap_text(gap: float | None) -> str:
    if gap is None:
        return "keeps the reference's bits"
    return "other tokens" if gap == float("inf") else f"scores differ by up to {gap:.2g}"


def _other_side(ctx: Ctx, site: Site) -> tuple[str, float | None, float | None] | None:
    """An encoder-decoder's prompt padded by the same amount on each side, re-run: (the other
    side, the score gap on the check's side, on the other side). ``None`` for a decoder-only
    model, whose new tokens must follow the prompt (no right padding to compare)."""
    gen = ctx.generate
    if not getattr(getattr(ctx.model, "config", None), "is_encoder_decoder", False):
        return None
    p, ref = ctx.prompts[site.prompt], ctx.reference[site.prompt]
    other = "left" if gen.side == "right" else "right"
    here = _score_gap(gen([p], extra=ctx.padding)[0], ref)
    there = _score_gap(gen([p], extra=ctx.padding, side=other)[0], ref)
    return other, here, there


def _numbers_padding(side: str, here: float | None, there: float | None) -> bool:
    """Left padding moves the prompt's positions and right padding by the same amount does not
    (its bits, or a score gap at least 10x smaller): the model numbers the padding positions."""
    return side == "left" and here is not None and (there is None or there * 10 <= here)


def padding_cause(ctx: Ctx, site: Site) -> Cause:
    p, side = ctx.prompts[site.prompt], ctx.generate.side
    runs = (observed(ctx.model, site.reference[0]), observed(ctx.model, site.other[0]))
    alone, padded = (r.positions(site.step, n, row) for r, (_, n, row) in zip(runs, (site.reference, site.other)))
    if alone is None or padded is None:
        positions = "the model's forward gets no position_ids (not compared)"
        shifted = False
    else:
        real = padded[-len(alone) :] if side == "left" else padded[: len(alone)]
        shifted = not torch.equal(real, alone)
        positions = (
            f"the prompt's position ids {'shift' if shifted else 'stay the same'} with the padding "
            f"({alone.tolist()[:6]}{'...' if len(alone) > 6 else ''} alone)"
        )
    sides = _other_side(ctx, site)
    numbered = False
    if sides is not None:
        other, here, there = sides
        numbered = _numbers_padding(side, here, there)
        positions += (
            f"; {ctx.padding} pad tokens on the {side}: {_gap_text(here)}; "
            f"re-run with them on the {other}: {_gap_text(there)}"
        )
        if _numbers_padding(other, there, here):
            positions += f" (the model numbers the padding positions: keep padding on the {side})"
    if runs[0].mask != runs[1].mask:
        positions += f"; the layers' attention mask: {runs[0].mask or 'none'} alone, {runs[1].mask or 'none'} padded"
    module_text, rerun = _module_part(ctx, site)
    if shifted:
        summary = "left padding shifts the prompt's positions"
    elif numbered:
        summary = (
            "left padding moves the prompt's positions: the model numbers the padding positions (its "
            "position embeddings count from the sequence's start, not from the attention mask)"
        )
    elif rerun is not None and rerun.rows:
        a, b = rerun.rows
        summary = (
            f"{side} padding changes the row count of the prompt's calls ({a} vs {b} rows into {site.label}), "
            "and that module gives a row other bits at other row counts"
        )
    else:
        summary = (
            f"{side} padding lengthens the sequence the prompt's {len(p)} tokens run in to {len(p) + ctx.padding}: "
            "other kernel shapes, masked positions included"
        )
    fix = fix_of("padding", "positions" if shifted else "right" if numbered else None)
    return Cause("padding", "padding", summary + site.start, f"at {site.where}; {positions}{module_text}", fix)


def cache_cause(ctx: Ctx, site: Site) -> Cause:
    summary = (
        "the KV-cache path and the recompute path compute other bits: with the cache a decode step runs "
        "one position per row, without it the whole sequence"
    ) + site.start
    fix = fix_of("cache-path")
    return Cause("cache-path", "cache", summary, f"at {site.where}" + _module_part(ctx, site)[0], fix)


def attention_cause(ctx: Ctx, site: Site) -> Cause:
    summary = "eager and sdpa attention compute other bits" + site.start
    condition = lambda run: ctx.with_other_attention(ctx.model, run)  # noqa: E731
    fix = fix_of("attention-implementation")
    evidence = f"at {site.where}" + _module_part(ctx, site, condition, "with the other attention implementation")[0]
    return Cause("attention-implementation", "attention", summary, evidence, fix)


def threads_cause(ctx: Ctx, site: Site) -> Cause:
    summary = "the generation depends on the intra-op thread count" + site.start
    fix = fix_of("thread-count")
    evidence = f"at {site.where}" + _module_part(ctx, site, ctx.at_one_thread, "at one thread")[0]
    return Cause("thread-count", "threads", summary, evidence, fix)


def repeat_cause(ctx: Ctx, site: Site) -> Cause:
    from samebits.determinism import deterministic

    with deterministic():
        first = [ctx.generate([p])[0] for p in ctx.prompts]
        again = [ctx.generate([p])[0] for p in ctx.prompts]
    fixed = all(_same_generation(x, y) for x, y in zip(first, again))
    summary = "the same prompt generates other bits when generated again in one process" + site.start
    again_text = _module_part(ctx, site, lambda run: run(), "again")[0]  # the module twice on the same inputs
    evidence = (
        f"at {site.where}; inside samebits.deterministic() two generations of every prompt "
        f"{'agree' if fixed else 'still differ'}{again_text}"
    )
    fix = fix_of("nondeterministic-kernels", None if fixed else "unfixed")
    return Cause("nondeterministic-kernels", "repeat", summary, evidence, fix, verified=fixed)


def process_cause(site_text: str) -> Cause:
    return Cause(
        "per-process",
        "process",
        "each fresh interpreter generates other bits",
        site_text,
        fix_of("per-process"),
    )


EXPLAIN = {
    "batch": batch_cause,
    "padding": padding_cause,
    "cache": cache_cause,
    "attention": attention_cause,
    "threads": threads_cause,
    "repeat": repeat_cause,
}
