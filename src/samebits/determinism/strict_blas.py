"""MKL's strict reproducibility mode for the command that chooses its own thread count
(``samebits predict``). Under ``MKL_CBWR=AUTO,STRICT`` a GEMM gives the same bits at every thread
count on this CPU's own code path (measured: both MLPs of bench/predict_speed.py at 1 and 2
threads, at no cost), so predict's thread plan finds the threads free and runs every core, where
it otherwise runs one thread per worker to keep outputs independent of ``--workers``.

MKL reads the variable at its first call, so it is set where the command line starts, before
anything ran; a value the user set is kept, and a portable level sets its own. ``verify`` of a
predict folder runs under the value the run recorded (it is bit-relevant)."""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "MKL_CBWR"
STRICT = "AUTO,STRICT"


def recorded_value(out_dir: str) -> str | None:
    """``MKL_CBWR`` as a predict folder's manifest recorded it (its fingerprint), else None."""
    from samebits.files import BadJson, read_json

    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        return None
    try:
        manifest = read_json(path)
    except BadJson:
        return None  # the command says what is wrong with it
    env = ((manifest.get("fingerprint") or {}).get("env") or {}) if isinstance(manifest, dict) else {}
    value = env.get(VARIABLE) if isinstance(env, dict) else None
    return value if isinstance(value, str) else None


def choose(command: str | None, operands: list[str]) -> str | None:
    """The ``MKL_CBWR`` value a command starts under (None: leave it): ``predict`` runs strict,
    ``verify`` of a predict folder as the run did."""
    if VARIABLE in os.environ:
        return None
    if command == "predict":
        return STRICT
    if command == "verify":
        return next((v for v in map(recorded_value, operands) if v is not None), None)
    return None


def enter(command: str | None, operands: list[str]) -> None:
    """Set ``MKL_CBWR`` for this process as :func:`choose` says (before the first GEMM)."""
    value = choose(command, operands)
    if value is not None:
        os.environ[VARIABLE] = value
