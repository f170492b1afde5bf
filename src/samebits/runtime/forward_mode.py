"""What every forward of a Predictor runs under: inference mode, its modules in eval (even after
it gave the model back), samebits' tiles where ``batch_invariant=`` asks for them, and the fill
of uninitialized memory where a forward reads such memory; entered per forward, or once for a
block of forwards from one thread (:meth:`ForwardMode.running`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from samebits.determinism.fill import asks_for_uninitialized, filling
from samebits.measure.model_state import evaluating
from samebits.runtime import fixed_order
from samebits.runtime.batch_invariant import BatchInvariant
from samebits.models.inputs import Model


class ForwardMode:
    """The switches of one model's forwards (``tiles``: the tile size of ``batch_invariant=``)."""

    def __init__(self, model: Model, tiles: int | None, device: str) -> None:
        self.modules = list(model.modules()) if isinstance(model, nn.Module) else []
        self.tiles, self.device = tiles, device
        self.fill = True  # until measured: every forward's uninitialized memory filled
        self._running: int | None = None  # the thread inside running()

    def measure_fill(self, forward: Callable[[], Any]) -> None:
        """Fill uninitialized memory only where one forward asks for it (determinism/fill.py)."""
        with torch.inference_mode(), evaluating(self.modules), self.tiled():
            self.fill = asks_for_uninitialized(forward) is not None

    def kind(self) -> Any:
        """What ``batch_invariant=`` runs here: the tile size, with the fixed-order kernels on
        CUDA where Triton is installed (other bits than the tiles)."""
        if self.tiles and self.device.startswith("cuda") and fixed_order.unavailable() is None:
            return [self.tiles, "fixed-order"]
        return self.tiles

    def tiled(self) -> contextlib.AbstractContextManager[Any]:
        """:func:`samebits.batch_invariant` where asked for, else nothing."""
        return BatchInvariant(self.tiles) if self.tiles else contextlib.nullcontext()

    def call(self, forward: Callable[[], Any]) -> Any:
        """``forward()`` under the switches (already set inside :meth:`running` on this thread)."""
        if self._running == threading.get_ident():
            return forward()
        with self._switches():
            return forward()

    def _switches(self) -> contextlib.AbstractContextManager[Any]:
        with contextlib.ExitStack() as stack:  # one that raises leaves none of the others entered
            for switch in (torch.inference_mode(), evaluating(self.modules), self.tiled(), filling(self.fill)):
                stack.enter_context(switch)
            return stack.pop_all()

    @contextlib.contextmanager
    def running(self, lock: Any) -> Iterator[None]:
        """The switches entered once and ``lock`` held for the block (measured: entering them per
        call was 5% of a 0.6 ms forward); nested, it changes nothing."""
        if self._running is not None:
            yield
            return
        with lock, self._switches():
            self._running = threading.get_ident()
            try:
                yield
            finally:
                self._running = None
