"""The load bench's own instruments (bench/proc_cpu.py, bench/wrk_load.py): the CPU a server's
process tree spends, and wrk's check of every answer against its quiet answer."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import proc_cpu  # noqa: E402
import wrk_load  # noqa: E402

BUSY = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"

pytestmark = pytest.mark.serial  # measures CPU time and load: alone, after the parallel run


def test_cpu_of_a_process_tree_counts_its_live_children():
    """A parent that busy-loops 0.4 s of CPU and starts a child that does 0.6 s: the tree's CPU
    seconds read at the end hold both (read while the child still lives)."""
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BUSY.format(s=0.6)!r} + 'time.sleep(30)'])\n"
        + BUSY.format(s=0.4)
        + "print('ready', flush=True)\ntime.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        seconds = proc_cpu.tree_cpu_seconds(proc.pid)
        while seconds < 0.95 and time.monotonic() < deadline:  # the child may still be busy
            time.sleep(0.1)
            seconds = proc_cpu.tree_cpu_seconds(proc.pid)
        # each busy loop runs to a total of CPU time (start-up included): 0.4 + 0.6, read in 10 ms ticks
        assert 0.95 <= seconds < 3.0, seconds
        own = proc_cpu.tree_cpu_seconds(proc.pid) - seconds
        assert own < 0.3  # sleeping: the reading does not grow
    finally:
        subprocess.run(["pkill", "-P", str(proc.pid)], check=False)
        proc.kill()
        proc.wait()


def test_cpu_of_a_gone_process_is_zero():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert proc_cpu.tree_cpu_seconds(proc.pid) == 0.0


def test_lua_strings_escape_every_byte_that_is_not_plain():
    assert wrk_load.lua_string(b'a"\\\x00\xff9') == '"a\\034\\092\\000\\2559"'


class _Answers(http.server.BaseHTTPRequestHandler):
    """Echoes the request's id; answers id "002" wrongly after its first (quiet) answer."""

    seen: dict[str, int] = {}

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rid = body["id"]
        n = self.seen[rid] = self.seen.get(rid, 0) + 1
        value = 1.5 if rid == "002" and n > 1 else 1.0
        out = json.dumps({"id": rid, "outputs": [{"data": [value]}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.skipif(
    wrk_load.available() is None, reason="wrk is not installed (the bench's setup: apt-get install wrk)"
)
def test_wrk_counts_answers_that_differ_from_their_quiet_answer():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/infer"
        bodies = [json.dumps({"id": f"{i:03d}", "x": [i]}).encode() for i in range(4)]
        headers = [{"Content-Type": "application/json"}] * 4
        quiet = []
        for body in bodies:  # one request at a time: the quiet answers
            import urllib.request

            with urllib.request.urlopen(urllib.request.Request(url, body, headers[0]), timeout=10) as r:
                quiet.append(r.read())
        cell = wrk_load.run(url, bodies, headers, quiet, 2, 40, 20.0)
        assert cell.answered >= 40 and cell.ok == cell.answered
        # bodies rotate: a quarter of the answers are id 002's, each one wrong
        assert cell.differ >= 9 and abs(cell.differ - cell.answered / 4) <= 2, cell
        assert cell.seconds < 15  # interrupted at the count, not left to run out -d
    finally:
        server.shutdown()
