"""What a long command is doing, on stderr: a spinner on a terminal; elsewhere (CI logs, pipes),
once the command has run ``QUIET_START`` seconds, a plain line per stage and one every
``HEARTBEAT`` seconds within a long stage, so a log never sits silent for minutes (and a quick
command, or a quick error, stays one line)."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape

HEARTBEAT = 10.0  # seconds between lines within one stage, off a terminal
QUIET_START = 2.0  # seconds before the first line, off a terminal


class Progress:
    """``with Progress("checking") as progress: work(progress=progress.update)``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self._status: Any = Console(stderr=True).status(label, spinner="dots") if self.tty else None
        self._message: str = ""
        self._stage: str | None = None
        self._started = self._said = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="samebits-progress", daemon=True)

    def __enter__(self) -> Progress:
        if self._status is not None:
            self._status.__enter__()
        else:
            self._beat.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        if self._status is not None:
            self._status.__exit__(kind, exc, tb)

    def update(self, message: str) -> None:
        """The work's latest step (``"axis batch"``, ``"layout: inputs offset"``)."""
        if self._status is not None:
            self._status.update(escape(f"{self.label}: {message}"))
            return
        stage = message.split(":")[0]
        with self._lock:
            self._message = message
            if stage != self._stage and self._speaking():
                self._say(f"{self.label}: {message}")
            self._stage = stage

    def _speaking(self) -> bool:
        return time.monotonic() - self._started >= QUIET_START

    def _say(self, line: str) -> None:
        self._said = time.monotonic()
        sys.stderr.write(
            f"samebits: {line}\n"
        )  # one write, newline included: another thread's line never lands inside it
        sys.stderr.flush()

    def _heartbeat(self) -> None:
        spoken = False
        while not self._done.wait(0.5):
            with self._lock:
                if not self._speaking():
                    continue
                elapsed = time.monotonic() - self._started
                if not spoken or time.monotonic() - self._said >= HEARTBEAT:
                    self._say(f"{self.label}: {self._message or 'starting'} ({elapsed:.0f} s so far)")
                spoken = True
