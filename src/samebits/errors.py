"""Exception classes: user errors (exit 2, one line) versus internal bugs (tracebacks)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
import warnings
from typing import Any, NoReturn


class SamebitsError(Exception):
    """Base class of every error samebits raises on purpose."""


class UserError(SamebitsError):
    """Bad input from the user: shown as one line on stderr, exit code 2.

    The message says what was wrong and what to do instead.
    """


class SpecError(UserError):
    """A MODEL spec or an input file could not be loaded."""


class MissingDependencyError(UserError):
    """An optional dependency needed by one feature is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None) -> None:
        hint = f"pip install 'samebits[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the optional package '{package}', which is not installed; {hint}")
        self.package = package


def require(package: str, feature: str, extra: str) -> None:
    """Raise :class:`MissingDependencyError` now, before any work, unless ``package`` imports."""
    import importlib

    try:
        importlib.import_module(package)
    except ImportError:
        raise MissingDependencyError(package, feature, extra) from None


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# How many characters of another library's message one line shows: the CLI sets it unless
# --verbose; None (a library caller) shows it whole.
MESSAGE_LIMIT: int | None = None


def first_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first non-empty line of ``exc``'s message, terminal colour codes removed (the type
    name where the message is empty; prefixed by it with ``with_type``), cut to
    ``MESSAGE_LIMIT`` characters where that is set."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    text = cut(lines[0]) if lines else ""
    if with_type or not text:
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text


def printable(text: str) -> str:
    """``text`` safe to print on one terminal line: control characters (escape sequences, newlines,
    carriage returns) and undecodable bytes written as Python escapes (``\\x1b``, ``\\n``),
    everything else kept. A file name can hold any of them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def cut(text: str) -> str:
    """``text`` cut at a word to ``MESSAGE_LIMIT`` characters, saying where the rest is."""
    if MESSAGE_LIMIT is None or len(text) <= MESSAGE_LIMIT:
        return text
    return text[:MESSAGE_LIMIT].rsplit(" ", 1)[0] + " ... (--verbose shows the whole message)"


class UserCodeExit(RuntimeError):
    """The user's code (a model's import, factory or forward) exited or raised what Python does
    not count as an error: ``sys.exit()``, ``GeneratorExit``, a ``KeyboardInterrupt`` no signal
    caused. Raised as an ordinary exception so that every error path (one line, exit 2, per-axis
    isolation) handles it; a real interrupt is never turned into one."""


# The signals this process received, where the CLI tracks them (its handlers append here);
# None in a library, where a KeyboardInterrupt is always the user's own Ctrl-C.
SIGNALS: list[int] | None = None


def _from_signal(exc: BaseException) -> bool:
    if SIGNALS is None:
        return isinstance(exc, KeyboardInterrupt)
    return bool(SIGNALS) and isinstance(exc, (KeyboardInterrupt, SystemExit))


class UserCodeChanged(UserWarning):
    """The user's code changed something of the process that samebits relies on (the working
    folder) and samebits put it back; the CLI prints these whole."""


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under us
        return None


class _HardExit(BaseException):
    """``os._exit(code)`` called by the user's code in the thread that runs it (turned into a
    :class:`UserCodeExit` at the boundary)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


_REAL_EXIT = os._exit
_USER_THREADS: dict[int, int] = {}  # thread id -> user-code blocks it is inside


def _exit_of_user_code(status: int) -> NoReturn:
    """``os._exit`` while user code runs: in a thread inside :func:`user_code`, an exception the
    boundary reports (a forward that called ``os._exit(0)`` ended a check with exit 0, nothing
    done); in any other thread (samebits' watchdog), the real exit."""
    if _USER_THREADS.get(threading.get_ident()):
        raise _HardExit(status)
    _REAL_EXIT(status)


_DESCRIPTOR = {"stdout": 1, "stderr": 2}


def _reopened(name: str, was: Any, what: str) -> None:
    """``sys.<name>`` again where the user's code closed it (or put a closed stream there): a
    fresh stream on the process's own descriptor, which closing it again leaves open (the report
    still has somewhere to go), with a note."""
    now = getattr(sys, name)
    if not getattr(now, "closed", False):
        return  # open: as it was, or a working redirect of the code's own
    with contextlib.suppress(OSError, ValueError):
        os.fstat(_DESCRIPTOR[name])  # the descriptor itself is still there
        stream = io.TextIOWrapper(
            open(_DESCRIPTOR[name], "wb", buffering=0, closefd=False),  # noqa: SIM115 - the process's from now on
            encoding=getattr(was, "encoding", None) or "utf-8",
            errors=getattr(was, "errors", None) or "strict",
            line_buffering=True,
        )
        setattr(sys, name, stream)
        warnings.warn(f"{what} closed sys.{name}; samebits opened it again", UserCodeChanged, stacklevel=4)


class user_code:  # noqa: N801 - used as a function: ``with user_code("the model's forward"):``
    """Run the user's code: ``SystemExit``, ``os._exit()``, ``GeneratorExit`` and an interrupt no
    signal caused become :class:`UserCodeExit` ("the model's forward called sys.exit(0)"). A
    working folder the code changed is changed back (relative paths, children's folder), and a
    ``sys.stdout``/``sys.stderr`` it closed opened again, each with a :class:`UserCodeChanged`
    warning. A class, not a generator: it wraps every forward (about 1.5 us)."""

    __slots__ = ("what", "cwd", "streams", "me")

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        self.cwd, self.streams, self.me = _cwd(), (sys.stdout, sys.stderr), threading.get_ident()
        _USER_THREADS[self.me] = _USER_THREADS.get(self.me, 0) + 1
        os._exit = _exit_of_user_code

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        me = self.me
        _USER_THREADS[me] -= 1
        if not _USER_THREADS[me]:
            del _USER_THREADS[me]
        if not _USER_THREADS and os._exit is _exit_of_user_code:
            os._exit = _REAL_EXIT  # no user code runs: the process's own again
        self._put_back()
        if isinstance(exc, (SystemExit, GeneratorExit, KeyboardInterrupt, _HardExit)) and not _from_signal(exc):
            if isinstance(exc, _HardExit):
                how = f"called os._exit({exc.code!r})"
            elif isinstance(exc, SystemExit):
                how = f"called sys.exit({exc.code!r})"
            else:
                how = f"raised {type(exc).__name__}"
            raise UserCodeExit(f"{self.what} {how}") from None

    def _put_back(self) -> None:
        now = _cwd()
        if self.cwd is not None and now != self.cwd:
            with contextlib.suppress(OSError):
                os.chdir(self.cwd)
            warnings.warn(
                f"{self.what} changed the working folder to {now}; samebits changed it back to {self.cwd}",
                UserCodeChanged,
                stacklevel=3,
            )
        _reopened("stdout", self.streams[0], self.what)
        _reopened("stderr", self.streams[1], self.what)
