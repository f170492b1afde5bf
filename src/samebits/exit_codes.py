"""The one exit-code rule of every report samebits makes (check, check --generate, doctor,
verify, lint), so that a CI job reads them all alike."""

from __future__ import annotations

CLEAN, FOUND, UNUSABLE, BUG = 0, 1, 2, 3


def exit_code(*, found: bool, errored: bool = False, ran: bool = True) -> int:
    """1 when the report found what it looks for (a divergence, a finding, a mismatch); else 2
    when any part of it could not run or nothing ran at all; else 0."""
    if found:
        return FOUND
    return UNUSABLE if errored or not ran else CLEAN
