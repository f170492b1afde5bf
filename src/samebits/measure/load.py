"""How busy the machine is while something is timed: the 1-minute load average against the
cores this process may use, and the CPU that other processes took meanwhile (measured, from
``/proc/stat``, where the system has it)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

# Other processes took at least this share of the cores while a timing ran: its numbers are
# not this model's alone. A quarter of the cores, and never under half a core.
OTHERS_SHARE = 0.25


def usable_cores() -> float:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 1)
    quota = _cgroup_quota()
    return min(cores, quota) if quota else cores


def _cgroup_quota() -> float | None:
    try:  # cgroup v2: "max 100000" or "200000 100000"
        limit, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        length = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return quota / length if quota > 0 and length > 0 else None
    except (OSError, ValueError):
        return None


def _busy_seconds() -> float | None:
    """CPU seconds spent busy (steal included: a hypervisor that gives our core to another
    machine is contention too) on the CPUs this process may use, since boot."""
    try:
        allowed = os.sched_getaffinity(0)
        lines = Path("/proc/stat").read_text().splitlines()
    except (AttributeError, OSError):
        return None
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in allowed:
            continue
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
        total += user + nice + system + irq + softirq + steal
    return total / ticks


def _own_seconds() -> float:
    """This process's CPU seconds, every thread. Not its children's: those are counted when
    reaped, all at once, and a child running meanwhile competes for the cores like any other."""
    t = os.times()
    return t.user + t.system


@dataclasses.dataclass(frozen=True)
class Load:
    """The machine while a timing ran."""

    average: float  # 1-minute load average when it ended
    cores: float  # cores this process may use
    others: float | None  # cores' worth of CPU other processes used meanwhile (None: not measurable here)

    @property
    def busy(self) -> bool:
        """Whether the load average exceeded the cores, or other processes took a share of them."""
        return self.average > self.cores or (
            self.others is not None and self.others >= max(0.5, OTHERS_SHARE * self.cores)
        )

    def describe(self) -> str:
        """``load 3.1 on 2 cores`` (and what other processes used, where measured)."""
        text = f"load {self.average:.1f} on {self.cores:g} cores"
        if self.others is not None and self.others >= 0.05:
            text += f", other processes used {self.others:.1f} of them while it ran"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "busy": self.busy}

    @classmethod
    def from_dict(cls, data: Any) -> Load | None:
        try:
            others = data.get("others")
            return cls(float(data["average"]), float(data["cores"]), None if others is None else float(others))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


class LoadWatch:
    """Measures :class:`Load` over a stretch of time: ``with LoadWatch() as w: ...; w.load``."""

    def __enter__(self) -> LoadWatch:
        self._start = (time.monotonic(), _busy_seconds(), _own_seconds())
        return self

    def __exit__(self, *exc: object) -> None:
        self.load = self.now()

    def now(self) -> Load:
        """The load from the start until now."""
        wall0, busy0, own0 = self._start
        wall, busy = time.monotonic() - wall0, _busy_seconds()
        others = None
        if busy0 is not None and busy is not None and wall > 0.05:
            others = max(0.0, (busy - busy0) - (_own_seconds() - own0)) / wall
        return Load(os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0, usable_cores(), others)
