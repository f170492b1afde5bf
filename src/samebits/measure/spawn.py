"""The one place samebits starts processes: ``python -m ENTRY ARGS`` (nothing imported from the
working folder: :mod:`samebits.pystart`) in its own process group
(killed as one), with ``PR_SET_PDEATHSIG`` (Linux: it dies with samebits however samebits ends),
stderr into a temporary file (a chatty child never blocks on a full pipe; its last line explains
a death), and registered so that an exit, a signal or the watchdog kills it. Its stdin and stdout
carry :mod:`samebits.measure.wire` messages (:meth:`Child.send` / :meth:`Child.receive`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import IO

from samebits import deadline
from samebits.measure.job import Reply
from samebits.measure.wire import Message, Readable, read_message, write_message
from samebits.pystart import module_argv

_LIVE: set[Child] = set()  # children still running, killed if the parent stops


class ChildDied(RuntimeError):
    """The child process ended before it answered (killed after a hang, crashed, out of memory)."""


class ProtocolError(ChildDied):
    """The child answered what is not samebits' protocol (it is killed like one that died)."""


def _outside(exc: Exception) -> ProtocolError:
    return ProtocolError(f"the child process answered outside samebits' protocol: {type(exc).__name__}: {exc}")


def read_reply(stream: Readable) -> Reply:
    """One :class:`~samebits.measure.job.Reply` from a child's ``stream``: ``EOFError`` (or
    ``OSError``) where the stream ends first, :class:`ProtocolError` where what it holds is no
    reply (no JSON, no safetensors, a length too large, a header that is no reply)."""
    try:
        return Reply.from_message(read_message(stream))
    except (EOFError, OSError):
        raise
    except Exception as exc:
        raise _outside(exc) from None


def kill_children() -> None:
    """Kill every child still running, with its whole process group."""
    for child in list(_LIVE):
        child.kill()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """Linux: the child gets SIGKILL when the parent dies, however it dies (PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


atexit.register(kill_children)
deadline.on_fire(kill_children)


class Child:
    """One child process. ``pipes``: stdin and stdout are pipes for :meth:`send`/:meth:`receive`
    (else stdin is closed and stdout discarded); ``env`` replaces the environment."""

    def __init__(
        self,
        entry: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        pipes: bool = False,
        program: Sequence[str] | None = None,
    ) -> None:
        """``program``: run these argv words instead of ``python -m entry args`` (another
        program: ``wrk``, a user's ``sh -c CMD``), in the same process group and registry."""
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._tail = "no output"
        self.proc = subprocess.Popen(
            list(program) if program is not None else [*module_argv(entry), *args],
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stderr=self._stderr,
            start_new_session=True,  # its own process group: killed as one
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        _LIVE.add(self)

    @classmethod
    def program(cls, argv: Sequence[str], *, env: Mapping[str, str] | None = None, pipes: bool = False) -> Child:
        """Another program than Python (``wrk``; ``["sh", "-c", CMD]``), started as every child is."""
        return cls(argv[0], env=env, pipes=pipes, program=argv)

    def wait(self, timeout: float) -> int | None:
        """Its exit status within ``timeout`` seconds, else ``None`` (it still runs)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def interrupt(self) -> None:
        """SIGINT to its process group (``wrk`` then stops and prints its summary)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGINT)

    def release(self) -> None:
        """Forget a child that exited on its own, leaving what it started in the background
        running (a restart command's server): nothing of its group is killed later."""
        self._tail = self.tail()
        self._stderr.close()
        _LIVE.discard(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once it ended (``None`` while it runs); -N for signal N."""
        return self.proc.poll()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def stdout(self) -> IO[bytes]:
        assert self.proc.stdout is not None, "a child started without pipes"
        return self.proc.stdout

    def tail(self) -> str:
        """The last line the child wrote to stderr (why it died), or ``no output``."""
        if self._stderr.closed:
            return self._tail
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(max(0, self._stderr.seek(0, os.SEEK_END) - 65536))  # a chatty child's last lines only
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else "no output"
        return "no output"

    def ended(self, what: str = "the child process") -> str:
        """``what`` ended (exit status or signal) and its last stderr line, in words."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)  # its pipe closes a moment before its exit status is there
        code = self.proc.poll()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return f"{what} {how}: {self.tail()}"

    # -- the transport -----------------------------------------------------------------------------
    def send(self, message: Message) -> None:
        """One message (:mod:`samebits.measure.wire`) on its stdin."""
        stdin = self.proc.stdin
        assert stdin is not None, "a child started without pipes"
        try:
            write_message(stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            raise ChildDied("the child process ended") from None

    def receive(self) -> Message:
        """One message from its stdout; :class:`ChildDied` when the child ended before writing
        all of it, or wrote what is not this protocol."""
        try:
            return read_message(self.stdout)
        except (EOFError, OSError):
            raise ChildDied("the child process ended") from None
        except Exception as exc:  # a header that is no JSON, bytes that are no safetensors, a length too large
            raise _outside(exc) from None

    def reply(self) -> Reply:
        """One reply (:func:`read_reply`); :class:`ChildDied` when the child ended first."""
        try:
            return read_reply(self.stdout)
        except (EOFError, OSError):
            raise ChildDied("the child process ended") from None

    # -- ending -----------------------------------------------------------------------------------
    def close_input(self) -> None:
        """Close its stdin: a worker's cue that no more work comes."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def finish(self, timeout: float = 5.0) -> None:
        """Close its stdin, wait ``timeout`` seconds for it to exit, then kill it."""
        self.close_input()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """Kill its process group now (a forward that hangs) and release what it held."""
        with contextlib.suppress(OSError):  # also where it died already: what it started in its group
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._tail = self.tail()  # kept: the file is closed now, and tail() still answers
        self._stderr.close()
        _LIVE.discard(self)
