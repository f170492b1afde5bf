"""The ``samebits`` command: subcommands, ``--version``, ``--debug``, and the one place that turns
user errors into a one-line message and exit code 2."""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Optional

import typer

from samebits import errors
from samebits._version import __version__
from samebits.cli import strict_blas
from samebits.cli import (
    bench,
    cache,
    check,
    demo,
    doctor,
    env,
    lint,
    portable,
    predict,
    probe,
    record,
    report,
    run,
    serve,
    verify,
)
from samebits.errors import UserError, first_line
from samebits.exit_codes import exit_past_user_threads

MESSAGE_LIMIT = 200  # characters of another library's message on one line, unless --verbose

app = typer.Typer(
    name="samebits",
    help="Reproducible, fast, memory-safe PyTorch inference, and the proof: same input, same bits.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"samebits {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Show the warnings, logs and progress bars of torch and other libraries (kept off the terminal otherwise), and their long messages whole.",
    ),
) -> None:
    """Exit codes: 0 all good, 1 the check found what it looks for, 2 usage or input error (or a
    timeout, or nothing could run), 3 an internal error (a bug: please report it)."""


check.register(app)
doctor.register(app)
bench.register(app)
lint.register(app)
record.register(app)
verify.register(app)
env.register(app)
run.register(app)
demo.register(app)
cache.register(app)
serve.register(app)
probe.register(app)
predict.register(app)
report.register(app)


_signals: list[int] = []  # the signals this process received, in order
errors.SIGNALS = _signals  # user code's own sys.exit/KeyboardInterrupt is told apart from these


def _terminate(signum: int, frame: object) -> None:
    _signals.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)  # unwinds: children are killed and temp folders removed on the way


def _redeliver(unraisable: object, _default: object = sys.unraisablehook) -> None:
    """A signal handled while Python runs a finaliser (``__del__``, a weakref callback) raises
    there, and Python drops exceptions raised in finalisers: the signal is delivered again once
    the finaliser has returned, so the command still stops."""
    exc = getattr(unraisable, "exc_value", None)
    if _signals and isinstance(exc, (SystemExit, KeyboardInterrupt)):
        threading.Timer(0.01, _thread.interrupt_main, args=(_signals[-1],)).start()
        return
    _default(unraisable)  # type: ignore[operator]


def _signal_code(code: int) -> int:
    """The exit code of a run that received a signal: 130 for SIGINT, 128 + N for another."""
    if not _signals or code not in (0, 1):
        return code
    return 130 if _signals[0] == signal.SIGINT else 128 + _signals[0]


def main(argv: list[str] | None = None) -> None:
    """Entry point, and the one error boundary: a :class:`UserError` is one line on stderr and
    exit 2; an interrupt exits 130 (SIGTERM 143); anything else is a bug: one line, exit 3
    (never 1, which means "found what it looks for"), the traceback under ``--debug``. Warnings
    and logs of third-party libraries are kept off the terminal unless ``--verbose``."""
    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--")] if "--" in args else args
    if argv is None:  # the process's own command line: --portable may start it again
        portable.ARGV = args
        strict_blas.enter(args)  # before any GEMM (MKL reads it once); never in a caller's process
    debug, verbose = "--debug" in own, "--verbose" in own
    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):  # a closed terminal sends SIGHUP
        if sig is not None:
            signal.signal(sig, _terminate)
    sys.unraisablehook = _redeliver
    with warnings.catch_warnings(record=not verbose) as caught:
        if not verbose:
            warnings.simplefilter("always")
            for name in ("torch", "onnxruntime", "onnxscript", "transformers"):
                logging.getLogger(name).setLevel(logging.ERROR)
            errors.MESSAGE_LIMIT = MESSAGE_LIMIT
            command = next((a for a in own if not a.startswith("-")), None)
            if command != "run":  # `samebits run` hands the user's program its own environment
                _no_progress_bars()
                # transformers sets its loggers' level when imported (after this): its own variable
                # is what holds, here and in the children samebits starts
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        code = _signal_code(_run(args, debug))
    if _signals:  # typer turns Ctrl-C into a silent exit 130: the last line says why the work stopped
        typer.echo(f"samebits: {_stopped_by(_signals[0])}", err=True)
    caught = caught or []  # None under --verbose: warnings were shown as they came
    own_notes = [w for w in caught if issubclass(w.category, errors.UserCodeChanged)]
    for message in dict.fromkeys(str(w.message) for w in own_notes):  # once each: a forward repeats them
        typer.echo(f"samebits: note: {message}", err=True)
    caught = [w for w in caught if not issubclass(w.category, errors.UserCodeChanged)]
    if caught and code in (0, 1):
        sources = sorted({_package_of(w.filename) for w in caught})
        typer.echo(
            f"samebits: {len(caught)} warning(s) from {', '.join(sources[:3])} hidden; rerun with --verbose to see them",
            err=True,
        )
    exit_past_user_threads(code)
    sys.exit(code)


def _stopped_by(signum: int) -> str:
    """``interrupted`` for Ctrl-C; ``stopped by SIGTERM`` for another signal."""
    if signum == signal.SIGINT:
        return "interrupted"
    try:
        return f"stopped by {signal.Signals(signum).name}"
    except ValueError:
        return f"stopped by signal {signum}"


def _no_progress_bars() -> None:
    """Third-party progress bars off (transformers' "Loading weights", tqdm's), here and in the
    children samebits starts, unless the environment already says otherwise."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")


def _package_of(filename: str) -> str:
    """``torch`` for ``.../site-packages/torch/jit/_trace.py``; the file name otherwise."""
    parts = Path(filename).parts
    return parts[parts.index("site-packages") + 1] if "site-packages" in parts[:-1] else Path(filename).name


def _run(args: list[str], debug: bool) -> int:
    try:
        app(args=args, prog_name="samebits", standalone_mode=True)  # exits through SystemExit; usage errors exit 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except UserError as exc:
        if debug:
            raise
        typer.echo(f"samebits: error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        if not _signals:  # a signal's line is main's
            typer.echo("samebits: interrupted", err=True)
        return 130
    except BaseException as exc:  # an Exception, or a GeneratorExit no user code raised: a bug
        if debug:
            raise
        typer.echo(
            f"samebits: internal error: {first_line(exc, with_type=True)}; please report it (rerun with --debug for the traceback)",
            err=True,
        )
        return 3
    return 0
