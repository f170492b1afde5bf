"""Filler traffic from ``wrk`` (a compiled HTTP load generator, Debian's ``wrk`` package) where it
is installed, so that the client does not take the cores of a server it shares a machine with:
one thread, ``connections`` keep-alive connections rotating the filler requests, stopped when
the probe answers are in (SIGINT: wrk then prints its summary), at a count and at a time."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path

from samebits.measure.spawn import Child

RESULT = "SAMEBITS_PROBE_WRK "
WARMUP_S = 0.3  # wrk's connections open before the probes start

SCRIPT = r"""
local requests = {%(requests)s}
local limit = %(limit)d
answered, ok, status_bad = 0, 0, 0
local threads = {}
local sent = 0

function setup(thread)
  table.insert(threads, thread)
end

function request()
  sent = sent + 1
  return requests[(sent - 1) %% #requests + 1]
end

function response(status, headers, body)
  answered = answered + 1
  if status == 200 then ok = ok + 1 else status_bad = status_bad + 1 end
  if answered >= limit then wrk.thread:stop() end
end

function done(summary, latency, requests_)
  local t = {answered = 0, ok = 0, status_bad = 0}
  for _, thread in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + thread:get(k) end
  end
  local e = summary.errors
  io.write(string.format('%(result)s{"answered": %%d, "ok": %%d, "status_bad": %%d, "socket_errors": %%d, "timeouts": %%d}\n',
    t.answered, t.ok, t.status_bad, e.connect + e.read + e.write, e.timeout))
end
"""


@dataclasses.dataclass
class WrkResult:
    """What wrk sent: answers, those with status 200, other statuses, socket errors, timeouts,
    and its own CPU seconds."""

    answered: int = 0
    ok: int = 0
    status_bad: int = 0
    socket_errors: int = 0
    timeouts: int = 0
    cpu_s: float = 0.0


def available() -> str | None:
    """The wrk executable, or None."""
    return shutil.which("wrk")


def lua_string(data: bytes) -> str:
    """``data`` as a Lua string literal (decimal escapes for all but plain printable bytes)."""
    safe = set(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
    return '"' + "".join(chr(b) if b in safe else f"\\{b:03d}" for b in data) + '"'


def lua_request(path: str, headers: dict[str, str], body: bytes) -> str:
    head = ", ".join(f"[{lua_string(k.encode())}] = {lua_string(v.encode())}" for k, v in headers.items())
    return f'wrk.format("POST", {lua_string(path.encode())}, {{{head}}}, {lua_string(body)})'


class Filler:
    """``with Filler(...) as filler:`` wrk runs while the block does; ``filler.result`` after."""

    def __init__(
        self,
        base: str,
        requests: list[tuple[str, dict[str, str], bytes]],
        connections: int,
        limit_s: float,
        max_requests: int,
        request_timeout_s: float,
    ) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="samebits-probe-wrk-")
        script = Path(self._dir.name) / "filler.lua"
        script.write_text(
            SCRIPT
            % {
                "requests": ", ".join(lua_request(*r) for r in requests),
                "limit": max_requests,
                "result": RESULT,
            }
        )
        self.argv = [
            available() or "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, int(limit_s + 0.999))}s",
            "--timeout",
            f"{max(1, int(request_timeout_s + 0.999))}s",
            "-s",
            str(script),
            base,
        ]
        self.result = WrkResult()
        self._lines: list[str] = []

    def __enter__(self) -> Filler:
        self._cpu = _children_cpu()
        self._child = Child.program(self.argv, pipes=True)
        self._reader = threading.Thread(target=self._read, name="samebits-probe-wrk", daemon=True)
        self._reader.start()
        time.sleep(WARMUP_S)  # its connections open (its "Running" line is buffered until it exits)
        return self

    def _read(self) -> None:
        for raw in self._child.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self._lines.append(line)

    def __exit__(self, *exc: object) -> None:
        self._child.interrupt()
        self._reader.join(10.0)
        self._child.kill()  # waited for: its CPU is in this process's children's usage now
        self.result = self._parse()
        self.result.cpu_s = _children_cpu() - self._cpu
        self._dir.cleanup()

    def _parse(self) -> WrkResult:
        for line in self._lines:
            if line.startswith(RESULT):
                with contextlib.suppress(ValueError, TypeError):
                    return WrkResult(**json.loads(line[len(RESULT) :]))
        return WrkResult()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
