"""The four axes of a probe, each a verdict on the same probe inputs: quiet (each input sent
alone, twice), loaded (each input inside concurrent traffic, at each concurrency), replicas (each
URL given, or fresh connections to one URL behind a load balancer) and restart (the user's
command, then the inputs again). The reference of every comparison is an input's first quiet
answer."""

from __future__ import annotations

import time
from collections.abc import Callable

from samebits.errors import printable
from samebits.measure.spawn import Child
from samebits.probe.clients import Client, ProbeError, Sample
from samebits.probe.compare import Difference, difference, groups
from samebits.probe.load import Cell
from samebits.probe.report import Axis
from samebits.probe.wire import Answer

RESTART_POLL_S = 0.25


def _widest(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def in_time(deadline: float, what: str) -> None:
    """:class:`ProbeError` once the run's ``--timeout-s`` has passed (checked between requests)."""
    if time.monotonic() > deadline:
        raise ProbeError(f"--timeout-s ran out during {what}", "timeout")


def quiet(client: Client, probes: list[Sample], repeats: int, deadline: float) -> tuple[Axis, list[Answer], float]:
    """Each input sent ``repeats`` times, one request at a time; every failure is the run's one
    line (nothing can be compared without these answers). Also the median quiet latency (s)."""
    answers, latencies = [], []
    for s in probes:
        runs = []
        for _ in range(repeats):
            in_time(deadline, "the quiet requests")
            started = time.perf_counter()
            runs.append(client.send(s))
            latencies.append(time.perf_counter() - started)
        answers.append(runs)
    agreed, first, widths = 0, None, []
    for sample, runs in zip(probes, answers):
        found = [d for d in (difference(runs[0], r) for r in runs[1:]) if d is not None]
        agreed += not found
        if found:
            first = first or (sample.label, found[0])
            widths += [d.max_abs for d in found]
    verdict = "identical" if agreed == len(probes) else "diverged"
    summary = f"{agreed}/{len(probes)} inputs answered alike {repeats} times in a row, one request at a time"
    axis = Axis("quiet", verdict, agreed, len(probes), summary, first=first, max_abs=_widest(widths))
    return axis, [runs[0] for runs in answers], sorted(latencies)[len(latencies) // 2]


SETTLE_S = 15.0  # after the load, how long the server may take to drain its queue
SETTLED = 3  # quiet-fast answers in a row that say it has


def settle(connect: Callable[[], Client], sample: Sample, quiet_s: float, deadline: float) -> float:
    """Wait (one request at a time, at most ``SETTLE_S``) until the server answers as fast as it
    did before the load, ``SETTLED`` times in a row: a server still working through the
    filler queued by the load (wrk's, a batcher's queue) would batch the next axes' requests
    with it. Returns the seconds waited."""
    started = time.monotonic()
    limit = min(started + SETTLE_S, deadline)
    fast, bound = 0, max(2 * quiet_s, quiet_s + 0.005)
    client = connect()
    try:
        while fast < SETTLED and time.monotonic() < limit:
            t = time.perf_counter()
            try:
                client.send(sample)
            except ProbeError:
                fast = 0
                time.sleep(RESTART_POLL_S)
                continue
            fast = fast + 1 if time.perf_counter() - t <= bound else 0
    finally:
        client.close()
    return time.monotonic() - started


def loaded(cells: list[Cell], timed_out: str = "") -> Axis:
    """The verdict over the cells measured: diverged where any probe answer differed from its
    quiet answer; an error where probe requests failed (or the time ran out) and none differed."""
    runs = sum(c.probe_answers for c in cells)
    differing = sum(c.differing for c in cells)
    per = ", ".join(f"c={c.concurrency}: {c.differing}/{c.probe_answers}" for c in cells)
    summary = f"{runs - differing}/{runs} probe answers under load have the quiet bits (differing {per})"
    hit = [c for c in cells if c.differing]
    if hit:
        first = hit[0].first
        assert first is not None
        return Axis(
            "loaded",
            "diverged",
            runs - differing,
            runs,
            summary,
            first=(f"concurrency {hit[0].concurrency}, {first[0]}", first[1]),
            max_abs=_widest([c.max_abs for c in hit]),
            starts_at=hit[0].concurrency,
            cells=cells,
        )
    failed = [c for c in cells if c.probe_failed]
    reason = timed_out
    if failed:
        c = failed[0]
        why = ", ".join(f"{k}: {n}" for k, n in c.failed.most_common(3))
        reason = f"{c.probe_failed} probe requests failed at concurrency {c.concurrency} ({why})"
    if reason or not cells:
        return Axis("loaded", "error", runs - differing, runs, summary, reason=reason or "nothing ran", cells=cells)
    return Axis("loaded", "identical", runs, runs, summary, cells=cells)


def replicas(
    targets: list[tuple[str, Callable[[], Client]]], probes: list[Sample], quiet_answers: list[Answer], deadline: float
) -> Axis:
    """Every input once against each target (a URL, or a fresh connection), one at a time;
    targets grouped by equal answers, the quiet run (the first URL) first."""
    labels, runs = ["quiet run"], [quiet_answers]
    for label, connect in targets:
        client = connect()
        try:
            run = []
            for s in probes:
                in_time(deadline, "the replica axis")
                run.append(client.send(s))
            runs.append(run)
        finally:
            client.close()
        labels.append(label)
    found = groups(runs)
    first: tuple[str, Difference] | None = None
    widths = []
    for i, run in enumerate(runs[1:], start=1):
        for sample, ref, got in zip(probes, quiet_answers, run):
            d = difference(ref, got)
            if d is not None:
                first = first or (f"{labels[i]}, {sample.label}", d)
                widths.append(d.max_abs)
    named = [[labels[i] for i in g] for g in found]
    agreed = len(found[0])
    summary = f"{agreed}/{len(runs)} runs agree (the quiet run and {len(targets)} {'targets' if len(targets) != 1 else 'target'})"
    if len(found) > 1:
        summary += ": " + " ".join("{" + ", ".join(g) + "}" for g in named)
    verdict = "identical" if len(found) == 1 else "diverged"
    return Axis("replicas", verdict, agreed, len(runs), summary, first=first, max_abs=_widest(widths), groups=named)


def restart(
    command: str,
    connect: Callable[[], Client],
    probes: list[Sample],
    quiet_answers: list[Answer],
    wait_s: float,
    deadline: float,
) -> Axis:
    """Run ``command`` (``sh -c``; what it leaves running in the background is left running),
    wait until the endpoint answers again (at most ``wait_s``), then every input once."""
    limit = min(wait_s, deadline - time.monotonic())
    child = Child.program(["sh", "-c", command])
    code = child.wait(max(0.0, limit))
    if code is None:
        child.kill()
        raise ProbeError(f"--restart-cmd did not finish within {limit:.0f} s: {printable(command)}", "restart")
    tail = child.tail()
    child.release()
    if code != 0:
        raise ProbeError(f"--restart-cmd exited with {code}: {printable(tail)}", "restart")
    until = time.monotonic() + max(0.0, min(wait_s, deadline - time.monotonic()))
    last = ""
    while True:
        client = connect()
        try:
            answers = [client.send(s) for s in probes]
            break
        except ProbeError as exc:
            last = str(exc)
            if time.monotonic() + RESTART_POLL_S > until:
                raise ProbeError(
                    f"the endpoint did not answer within {wait_s:g} s after --restart-cmd: {last}", exc.kind
                ) from None
            time.sleep(RESTART_POLL_S)
        finally:
            client.close()
    found = [difference(ref, got) for ref, got in zip(quiet_answers, answers)]
    agreed = sum(d is None for d in found)
    first = next(((s.label, d) for s, d in zip(probes, found) if d is not None), None)
    summary = f"{agreed}/{len(probes)} inputs answered after the restart with the quiet bits"
    verdict = "identical" if agreed == len(probes) else "diverged"
    return Axis(
        "restart", verdict, agreed, len(probes), summary, first=first, max_abs=_widest([d.max_abs for d in found if d])
    )
