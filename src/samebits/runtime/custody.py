"""What a Predictor holds of its caller's world while it lives, and gives back: the caller's model
(put in eval, grad off, maybe moved to another device or dtype) returned as it was, and the
shared :func:`samebits.deterministic` profile released; at :meth:`Custody.release`, or when the
Predictor is collected unclosed (finalizers: nothing here holds the Predictor itself)."""

from __future__ import annotations

import weakref
from typing import Any

from torch import nn

from samebits.determinism.shared import acquire_profile, release_profile
from samebits.errors import UserError
from samebits.measure.model_state import ModelState, hold
from samebits.models.inputs import Model


class Custody:
    """The model and profile ``owner`` holds; ``deterministic`` acquires the shared profile."""

    def __init__(self, owner: object, model: Model, deterministic: bool, seed: int, device: str) -> None:
        self.moved = self.released = False
        self._state: ModelState | None = None
        self._finalizers: list[weakref.finalize[Any, Any]] = []
        if isinstance(model, nn.Module):
            self._state, give_back = hold(model)
            self._finalizers.append(weakref.finalize(owner, give_back))
        if deterministic:
            acquire_profile(seed, device)
            self._finalizers.insert(0, weakref.finalize(owner, release_profile))  # the profile first, as close() did

    def settle(self) -> None:
        """Note whether setting up moved the model to another device or dtype."""
        self.moved = self._state.settle() if self._state is not None else False

    def release(self) -> None:
        """Every switch restored and the model given back (each once, whatever calls it again)."""
        for finalizer in self._finalizers:
            finalizer()
        self.released = True

    def usable(self) -> None:
        """A :class:`UserError` where the owner gave back a model it had moved: it cannot run it."""
        if self.released and self.moved:
            raise UserError(
                "this Predictor was closed and gave its model back on its own device and dtype; create a new one"
            )
