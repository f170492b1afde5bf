"""One load cell driven by ``wrk`` (a compiled HTTP load generator, Debian's ``wrk`` package), so
that the client does not take the cores the servers are measured on.

The Lua script sent to wrk rotates the given request bodies, stops after a count of answers (and
wrk's ``-d`` bounds the time), and checks every answer inside the client: an answer that carries
an ``"id"`` (the Open Inference Protocol echoes it) must equal, byte for byte, the quiet answer to
that id's body; one without must equal one of the quiet answers. Equal bytes are equal bits: the
JSON floats are shortest round-trip reprs, the binary extension the raw values."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import threading
import tempfile
import urllib.parse
from pathlib import Path

RESULT = "SAMEBITS_WRK "
REACHED = "SAMEBITS_WRK_REACHED"  # the count is reached: the bench interrupts wrk, which then reports

SCRIPT = r"""
local bodies = {%(bodies)s}
local headers = {%(headers)s}
local quiet = {%(quiet)s}
local known = {}
for _, q in ipairs(quiet) do known[q] = true end
local limit = %(limit)d
-- globals: done() reads them from each thread with thread:get
sent, answered, ok, differ, status_bad = 0, 0, 0, 0, 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function request()
  sent = sent + 1
  local i = (sent - 1) %% #bodies + 1
  return wrk.format("POST", %(path)s, headers[i], bodies[i])
end

function response(status, hdrs, body)
  answered = answered + 1
  if status ~= 200 then
    status_bad = status_bad + 1
  else
    ok = ok + 1
    local id = string.match(body, '"id"%%s*:%%s*"(%%d+)"')
    local expected = id and quiet[tonumber(id) + 1]
    if expected then
      if body ~= expected then differ = differ + 1 end
    elseif not known[body] then
      differ = differ + 1
    end
  end
  if answered == limit then
    io.write("%(reached)s\n")
    io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local t = {answered = 0, ok = 0, differ = 0, status_bad = 0}
  for _, thread in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + thread:get(k) end
  end
  local e = summary.errors
  io.write(string.format(
    '%(result)s{"answered": %%d, "ok": %%d, "differ": %%d, "status_bad": %%d, "requests": %%d, "duration_us": %%d, '
    .. '"p50_us": %%d, "p99_us": %%d, "socket_errors": %%d, "timeouts": %%d}\n',
    t.answered, t.ok, t.differ, t.status_bad, summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write, e.timeout))
end
"""


@dataclasses.dataclass
class WrkCell:
    """What wrk measured in one cell: answers, checks, rate and latency."""

    answered: int
    ok: int
    differ: int  # 200 answers whose bytes are not the quiet answer's
    status_bad: int
    seconds: float
    p50_ms: float
    p99_ms: float
    socket_errors: int
    timeouts: int
    cpu_s: float | None = None  # the client's own CPU seconds (user + system): the client's share of a shared machine

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0


def lua_string(data: bytes) -> str:
    """``data`` as a Lua string literal (decimal escapes for everything not plainly printable)."""
    safe = set(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
    return '"' + "".join(chr(b) if b in safe else f"\\{b:03d}" for b in data) + '"'


def lua_headers(headers: dict[str, str]) -> str:
    return "{" + ", ".join(f"[{lua_string(k.encode())}] = {lua_string(v.encode())}" for k, v in headers.items()) + "}"


def script(path: str, bodies: list[bytes], headers: list[dict[str, str]], quiet: list[bytes], limit: int) -> str:
    """The Lua script for one cell (``quiet[i]``: the answer to ``bodies[i]`` on an idle server)."""
    return SCRIPT % {
        "bodies": ", ".join(map(lua_string, bodies)),
        "headers": ", ".join(map(lua_headers, headers)),
        "quiet": ", ".join(map(lua_string, quiet)),
        "limit": limit,
        "path": lua_string(path.encode()),
        "result": RESULT,
        "reached": REACHED,
    }


def available() -> str | None:
    """The wrk executable, or None."""
    return shutil.which("wrk")


def _interrupt_at_count(cmd: list[str], limit_s: float, cpus: set[int] | None) -> tuple[list[str], int, float]:
    """Run wrk; SIGINT it when the script says the count is reached (wrk then stops every
    connection and reports the time up to there; a stopped thread alone would wait out ``-d``).
    Its output lines, exit code and CPU seconds (from the reaped child's resource usage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    timer = threading.Timer(limit_s, proc.kill)
    timer.start()
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(REACHED):
                proc.send_signal(signal.SIGINT)
        code = proc.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return lines, code, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finally:
        timer.cancel()


def run(
    url: str,
    bodies: list[bytes],
    headers: list[dict[str, str]],
    quiet: list[bytes],
    concurrency: int,
    limit: int,
    limit_s: float,
    cpus: set[int] | None = None,
) -> WrkCell:
    """``limit`` answers (at most ``limit_s`` seconds) at ``concurrency`` connections, one wrk thread."""
    exe = available()
    if exe is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    parts = urllib.parse.urlsplit(url)
    text = script(parts.path + (f"?{parts.query}" if parts.query else ""), bodies, headers, quiet, limit)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(text)
    try:
        cmd = [exe, "-t1", f"-c{concurrency}", f"-d{max(1, round(limit_s))}s", "--timeout", f"{round(limit_s)}s"]
        cmd += ["-s", f.name, f"{parts.scheme}://{parts.netloc}"]
        lines, code, cpu_s = _interrupt_at_count(cmd, limit_s + 30, cpus)
    finally:
        Path(f.name).unlink()
    line = next((x for x in lines if x.startswith(RESULT)), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result (exit {code}): {' | '.join(lines[-6:])}")
    r = json.loads(line[len(RESULT) :])
    return WrkCell(
        answered=r["answered"],
        ok=r["ok"],
        differ=r["differ"],
        status_bad=r["status_bad"],
        seconds=r["duration_us"] / 1e6,
        p50_ms=r["p50_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        socket_errors=r["socket_errors"],
        timeouts=r["timeouts"],
        cpu_s=cpu_s,
    )
