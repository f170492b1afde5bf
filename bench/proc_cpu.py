"""CPU seconds a process and all its descendants have used, from /proc (Linux): what a server
spends per request, the figure that holds best on a shared machine."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children) from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone between the listing and the read
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    # fields[1] is ppid (field 4); utime, stime, cutime, cstime are fields 14-17
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / TICKS


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and every live descendant, plus the children they
    have already reaped; 0.0 where ``root`` is gone."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                stats[int(entry)] = found
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root] if root in stats else []
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total
