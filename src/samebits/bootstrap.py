"""``python -m samebits.bootstrap --seed N [--threads N] -- (script | -m mod | -c code) args``.

Used by ``samebits run --deterministic``: enters :func:`samebits.deterministic` and then runs
the user's program as ``__main__``, with ``sys.argv`` and ``sys.path`` as Python would set them.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        sys.exit("samebits.bootstrap: usage: --seed N [--threads N] -- (script | -m module | -c code) [args...]")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="samebits.bootstrap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    opts = parser.parse_args(argv[:split])
    target = argv[split + 1 :]
    if not target:
        sys.exit("samebits.bootstrap: nothing to run after --")

    from samebits.determinism import deterministic

    _put_first_on_path(target)
    with deterministic(opts.seed, threads=opts.threads):
        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        elif target[0] == "-c":
            sys.argv = ["-c", *target[2:]]
            exec(compile(target[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            if not os.path.isfile(target[0]):
                print(f"samebits run: can't open file '{target[0]}': no such file", file=sys.stderr)
                sys.exit(2)
            sys.argv = list(target)
            runpy.run_path(target[0], run_name="__main__")


def _put_first_on_path(target: list[str]) -> None:
    """The first ``sys.path`` entry Python gives the user's program (samebits itself was started
    without it: :mod:`samebits.pystart`): the script's folder, the working folder for ``-m``,
    ``''`` for ``-c``; none where the interpreter's options (-P, -I) say so."""
    if getattr(sys.flags, "safe_path", 0) or sys.flags.isolated:
        return
    if target[0] == "-m":
        sys.path.insert(0, os.getcwd())
    elif target[0] == "-c":
        sys.path.insert(0, "")
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))


if __name__ == "__main__":
    main()
