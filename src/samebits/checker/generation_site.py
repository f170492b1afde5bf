"""Where two generations of ``check --generate`` first differ (a :class:`Site`: the prompt, the
step, the first module whose output differs there), and that module re-run alone on the inputs
it had in the two runs (and, when it works row by row, on the one row of interest at other row
counts: its row-count classes at that shape)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from samebits.measure.invariance import format_groups
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


def _selected(obj: object, n: int, row: int, last_token: tuple[int, int] | None = None) -> list[torch.Tensor]:
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
