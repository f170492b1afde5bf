"""A watchdog for forwards that never return: when no forward has made progress for the given
seconds, the command ends with one line and exit code 2 (its child processes die with it).

Progress is fed by every module forward (a global module hook) and by every model call samebits
makes (:func:`feed`); waits that are not forwards (child processes with their own timeout,
backend builds) run inside :func:`paused`. Only the CLI arms it: a library call cannot be
interrupted from Python, and ``os._exit`` is no thing for a library to do.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_active: Watchdog | None = None
_on_fire: list[Callable[[], None]] = []  # e.g. kill the child processes


class Watchdog:
    """Ends the process when nothing fed it for ``seconds`` (outside :func:`paused` blocks)."""

    def __init__(self, seconds: float, what: str, activity: str = "a forward") -> None:
        if not seconds > 0:
            from samebits.errors import UserError

            raise UserError(f"--timeout must be > 0 seconds, not {seconds:g}")
        self.seconds, self.what, self.activity = seconds, what, activity
        self.last = time.monotonic()
        self.pauses = 0
        self._stop = threading.Event()
        self._hook: Any = None

    def feed(self) -> None:
        self.last = time.monotonic()

    def _watch(self) -> None:
        step = min(1.0, self.seconds / 4)
        while not self._stop.wait(step):
            if self.pauses == 0 and time.monotonic() - self.last > self.seconds:
                self.fire()

    def fire(self) -> None:
        for fn in list(_on_fire):
            with contextlib.suppress(Exception):
                fn()
        sys.stderr.write(
            f"samebits: error: {self.what}: {self.activity} made no progress for {self.seconds:g} s (it hangs, or needs a larger --timeout)\n"
        )
        sys.stderr.flush()
        os._exit(2)

    def __enter__(self) -> Watchdog:
        global _active
        try:
            from torch.nn.modules.module import register_module_forward_hook

            self._hook = register_module_forward_hook(lambda *args: self.feed())
        except ImportError:  # torch without global hooks: model calls still feed
            self._hook = None
        _active = self
        threading.Thread(target=self._watch, name="samebits-watchdog", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active
        self._stop.set()
        if self._hook is not None:
            self._hook.remove()
        _active = None


def feed() -> None:
    """Progress: a forward returned (a no-op when no watchdog is armed)."""
    if _active is not None:
        _active.feed()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """A block that is not a forward (waiting for children, building a backend)."""
    watchdog = _active
    if watchdog is None:
        yield
        return
    watchdog.pauses += 1
    try:
        yield
    finally:
        watchdog.pauses -= 1
        watchdog.feed()


LOAD_TIMEOUT_ENV = "SAMEBITS_LOAD_TIMEOUT"  # seconds a model's import and factory may take; children inherit it
DEFAULT_LOAD_TIMEOUT = 300.0


def limit_loading(seconds: float) -> None:
    """The CLI's bound on loading a model (its import, its factory, a file): every later load in
    this process and in the child processes it starts ends with one line and exit 2 past it."""
    os.environ[LOAD_TIMEOUT_ENV] = f"{seconds:g}"


@contextlib.contextmanager
def loading(what: str) -> Iterator[None]:
    """A block that loads a model: bounded by :func:`limit_loading` where the CLI set it (a
    library load is not bounded: Python cannot interrupt it from inside)."""
    limit = os.environ.get(LOAD_TIMEOUT_ENV)
    try:
        seconds = float(limit) if limit else 0.0
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        yield
        return
    outer = _active
    if outer is not None:  # a command's watchdog is armed already: it watches the load, under its name
        activity, outer.activity = outer.activity, f"loading {what} (its import and factory)"
        outer.feed()
        try:
            yield
        finally:
            outer.activity = activity
            outer.feed()
        return
    with Watchdog(seconds, what, activity="loading it (its import and factory)"):
        yield


def on_fire(fn: Callable[[], None]) -> None:
    """Run ``fn`` before the process ends on a hang (once registered, kept)."""
    if fn not in _on_fire:
        _on_fire.append(fn)
