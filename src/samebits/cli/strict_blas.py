"""MKL's strict reproducibility mode for the command that chooses its own thread count
(``samebits predict``). Under ``MKL_CBWR=AUTO,STRICT`` MKL's GEMMs give the same bits at every
thread count on this CPU's own code path (MKL's promise; measured on both MLPs of
bench/predict_speed.py at 1 and 2 threads, at no cost), so predict's thread plan, which measures,
finds the threads free and runs every core, where it otherwise runs one thread per worker to keep
outputs independent of ``--workers``.

MKL reads the variable at its first call: it is set when samebits' own command line starts the
process, before any GEMM ran (torch itself is not imported here); a value the user set is kept,
and a portable level sets its own. ``verify`` of a predict folder run in this mode starts in it
again (the variable is bit-relevant)."""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "MKL_CBWR"
STRICT = "AUTO,STRICT"


def recorded_strict(folder: str) -> bool:
    """Whether ``folder`` is a predict folder whose run recorded this mode (its fingerprint's
    environment); anything unreadable is left to the command to word."""
    from samebits.files import read_json

    try:
        manifest = read_json(Path(folder) / "manifest.json")
        return bool(manifest["kind"] == "predict" and manifest["fingerprint"]["env"][VARIABLE] == STRICT)
    except Exception:  # no folder, no manifest, another shape: not a run of this mode
        return False


def choose(command: str | None, operands: list[str]) -> str | None:
    """The ``MKL_CBWR`` value a command starts under (None: leave it): ``predict`` runs strict,
    ``verify`` of a predict folder that ran strict runs strict again."""
    if VARIABLE in os.environ:
        return None
    if command == "predict" or (command == "verify" and any(map(recorded_strict, operands))):
        return STRICT
    return None


def enter(args: list[str]) -> None:
    """Set ``MKL_CBWR`` for this process as :func:`choose` says, from its command line."""
    words = [a for a in args if not a.startswith("-")]
    value = choose(words[0] if words else None, words[1:])
    if value is not None:
        os.environ[VARIABLE] = value
