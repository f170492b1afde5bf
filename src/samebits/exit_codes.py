"""The one exit-code rule of every report samebits makes (check, check --generate, doctor,
verify, lint), so that a CI job reads them all alike; and how a samebits process ends past
threads the model's code left running."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading

CLEAN, FOUND, UNUSABLE, BUG = 0, 1, 2, 3


def exit_code(*, found: bool, errored: bool = False, ran: bool = True) -> int:
    """1 when the report found what it looks for (a divergence, a finding, a mismatch); else 2
    when any part of it could not run or nothing ran at all; else 0."""
    if found:
        return FOUND
    return UNUSABLE if errored or not ran else CLEAN


def exit_past_user_threads(code: int) -> None:
    """Where a thread the model's code started (not a daemon) would keep this process alive
    after its work, end it now with ``code``, after what exit does (atexit: children killed,
    temporary folders removed; streams flushed). Returns where no such thread runs."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not others or not hasattr(atexit, "_run_exitfuncs"):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
