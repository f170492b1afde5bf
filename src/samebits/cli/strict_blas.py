"""MKL's strict reproducibility mode for the commands that run a model for others: ``samebits
predict`` and ``samebits serve``. Under ``MKL_CBWR=AUTO,STRICT`` MKL's GEMMs give the same bits at
every thread count on this CPU's own code path (MKL's promise; measured on both MLPs of
bench/predict_speed.py at 1 and 2 threads, at no cost), so predict's thread plan, which measures,
finds the threads free and runs every core, where it otherwise runs one thread per worker to keep
outputs independent of ``--workers``. A GEMM's rows then also keep their bits at every batch size
measured here: the Predictor verifies every size up to 32 on the medium MLP (without it 2, 4 and
8 on an AVX-512 Xeon), so serve runs a batch of 32 as one forward (bench/serve_load.py: 2808-2879
-> 5175-5461 req/s at c=64; a lone one-row forward takes 0.93 ms instead of 0.47). ``serve
--golden G`` starts in the mode G was recorded in (it must reproduce G's bits).
``SAMEBITS_STRICT_BLAS=0`` leaves the variable unset (to serve the bits of a process that runs
without the mode, such as your own Python process calling the Predictor).

MKL reads the variable at its first call: it is set when samebits' own command line starts the
process, before any GEMM ran (torch itself is not imported here); a value the user set is kept,
and a portable level sets its own. ``verify`` of a predict folder run in this mode starts in it
again (the variable is bit-relevant)."""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "MKL_CBWR"
STRICT = "AUTO,STRICT"
OPT_OUT = "SAMEBITS_STRICT_BLAS"  # "0": never set the mode


def recorded_strict(folder: str) -> bool:
    """Whether ``folder`` is a predict folder whose run recorded this mode (its fingerprint's
    environment); anything unreadable is left to the command to word."""
    from samebits.files import read_json

    try:
        manifest = read_json(Path(folder) / "manifest.json")
        return bool(manifest["kind"] == "predict" and manifest["fingerprint"]["env"][VARIABLE] == STRICT)
    except Exception:  # no folder, no manifest, another shape: not a run of this mode
        return False


GOLDEN_HEADER_LIMIT = 64 << 20  # a golden's header is JSON metadata: far less than this


def golden_strict(path: str) -> bool:
    """Whether the golden at ``path`` was recorded in this mode: its safetensors header read as
    data (8-byte length, JSON), torch not imported; anything unreadable is left to serve to word."""
    import json
    import struct

    try:
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > GOLDEN_HEADER_LIMIT:
                return False
            meta = json.loads(f.read(size))["__metadata__"]
        return bool(json.loads(meta["samebits"])["fingerprint"]["env"][VARIABLE] == STRICT)
    except Exception:  # no file, another format, an edited header: not a golden of this mode
        return False


def _golden_of(args: list[str]) -> str | None:
    """The value of ``--golden`` on a command line (``--golden G`` or ``--golden=G``)."""
    for i, arg in enumerate(args):
        if arg == "--golden" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--golden="):
            return arg.split("=", 1)[1]
    return None


def choose(command: str | None, operands: list[str], golden: str | None = None) -> str | None:
    """The ``MKL_CBWR`` value a command starts under (None: leave it): ``predict`` runs strict,
    ``serve`` too unless its ``golden`` was recorded otherwise, ``verify`` of a predict folder
    that ran strict runs strict again."""
    if VARIABLE in os.environ or os.environ.get(OPT_OUT) == "0":
        return None
    if command == "predict" or (command == "verify" and any(map(recorded_strict, operands))):
        return STRICT
    if command == "serve" and (golden is None or golden_strict(golden)):
        return STRICT
    return None


def enter(args: list[str]) -> None:
    """Set ``MKL_CBWR`` for this process as :func:`choose` says, from its command line."""
    words = [a for a in args if not a.startswith("-")]
    value = choose(words[0] if words else None, words[1:], _golden_of(args))
    if value is not None:
        os.environ[VARIABLE] = value
