"""One concurrency level of the loaded axis: the probe inputs mixed into traffic of filler inputs,
``concurrency`` requests in flight, every probe answer compared with its quiet answer by raw
bytes. The filler comes from ``wrk`` where it is installed (REST; ``concurrency - probers``
connections), else from the same Python threads that send the probes (one connection each).
Bounded by a count of requests and by a deadline; the client's own CPU per request is measured
(this process's threads, plus wrk's), so a saturated client shows."""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from samebits.probe import wrk
from samebits.probe.clients import Client, ProbeError, Sample
from samebits.probe.compare import Difference, difference
from samebits.probe.wire import Answer

PROBE_SHARE = 4  # one request in this many is a probe input (the Python client's schedule)
PROBERS_PER = 8  # with wrk: one Python prober per this many connections (at least one)
WRK_REQUEST_FACTOR = 20  # with wrk: its filler stops at this many times --requests at most


@dataclasses.dataclass
class Cell:
    """What one concurrency level measured."""

    concurrency: int
    client: str  # who sent the filler: "python" or "wrk"
    sent: int = 0  # requests sent, probes and filler
    probe_answers: int = 0
    differing: int = 0  # probe answers whose bytes are not the quiet answer's
    failed: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)  # why, probes and filler
    probe_failed: int = 0
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    first: tuple[str, Difference] | None = None  # the first probe answer that differed: (probe, how)
    max_abs: float | None = None  # over every differing probe answer

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    @property
    def client_cpu_ms_per_request(self) -> float | None:
        return self.client_cpu_s * 1000 / self.sent if self.sent else None

    def record(self, label: str, found: Difference | None) -> None:
        self.probe_answers += 1
        if found is None:
            return
        self.differing += 1
        self.first = self.first or (label, found)
        if found.max_abs is not None:
            self.max_abs = found.max_abs if self.max_abs is None else max(self.max_abs, found.max_abs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "client": self.client,
            "requests": self.sent,
            "probe_answers": self.probe_answers,
            "differing": self.differing,
            "probe_failed": self.probe_failed,
            "failed": dict(self.failed),
            "seconds": round(self.seconds, 4),
            "requests_per_s": round(self.rate, 1),
            "client_cpu_ms_per_request": self.client_cpu_ms_per_request,
            "max_abs": self.max_abs,
            "first": {"probe": self.first[0], **self.first[1].to_dict()} if self.first else None,
        }


def schedule(probes: int, fillers: int, requests: int) -> list[tuple[bool, int]]:
    """``requests`` items (probe?, index): every ``PROBE_SHARE``-th a probe input in turn (each at
    least once), the others filler."""
    slots = max(probes, requests // PROBE_SHARE)
    total = max(requests, slots)
    at = {round(j * total / slots) for j in range(slots)}
    items, p, f = [], 0, 0
    for i in range(total):
        if i in at or not fillers:
            items.append((True, p % probes))
            p += 1
        else:
            items.append((False, f % fillers))
            f += 1
    return items


def run_cell(
    connect: Callable[[], Client],
    probes: list[Sample],
    quiet: list[Answer],
    fillers: list[Sample],
    concurrency: int,
    requests: int,
    deadline: float,
    filler: wrk.Filler | None = None,
    slack_s: float = 1.0,
) -> Cell:
    """One level: with ``filler`` (wrk, already configured for ``concurrency - probers``
    connections) the Python threads send only the probes; else they send the whole schedule.
    A thread still waiting for an answer at the deadline is waited for ``slack_s`` (a request's
    timeout) at most."""
    cell = Cell(concurrency, "wrk" if filler else "python")
    if filler is not None:
        probers = max(1, concurrency // PROBERS_PER)
        items = [(True, j % len(probes)) for j in range(max(len(probes), requests // PROBE_SHARE))]
    else:
        probers = concurrency
        items = schedule(len(probes), len(fillers), requests)
    lock = threading.Lock()
    position = iter(range(len(items)))
    go = threading.Event()

    def worker() -> None:
        client = connect()
        go.wait()
        try:
            while time.monotonic() < deadline:
                with lock:
                    i = next(position, None)
                if i is None:
                    return
                is_probe, k = items[i]
                sample = probes[k] if is_probe else fillers[k]
                try:
                    got = client.send(sample)
                except ProbeError as exc:
                    with lock:
                        cell.sent += 1
                        cell.failed[exc.kind] += 1
                        cell.probe_failed += is_probe
                    continue
                found = difference(quiet[k], got) if is_probe else None
                with lock:
                    cell.sent += 1
                    if is_probe:
                        cell.record(sample.label, found)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, name=f"samebits-probe-{i}", daemon=True) for i in range(probers)]
    for t in threads:
        t.start()
    cpu, started = time.process_time(), time.monotonic()
    if filler is not None:
        filler.__enter__()
    go.set()
    try:
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + slack_s)
    finally:
        if filler is not None:
            filler.__exit__(None, None, None)
    cell.seconds = time.monotonic() - started
    cell.client_cpu_s = time.process_time() - cpu
    if filler is not None:
        r = filler.result
        cell.sent += r.answered + r.socket_errors + r.timeouts
        cell.client_cpu_s += r.cpu_s
        for kind, n in (("status", r.status_bad), ("closed", r.socket_errors), ("timeout", r.timeouts)):
            if n:
                cell.failed[kind] += n
    return cell
