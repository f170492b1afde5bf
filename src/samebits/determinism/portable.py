"""Portable levels: the variables that make MKL, oneDNN and ATen take one baseline's code paths
on any x86 CPU that supports it, so that two CPUs of one level run the same kernels. They are
read when the libraries load: set before the process starts (``samebits run --portable``)."""

from __future__ import annotations

import dataclasses

from samebits.errors import UserError


@dataclasses.dataclass(frozen=True)
class Level:
    name: str
    requires: tuple[str, ...]  # /proc/cpuinfo flags a CPU needs to run it
    env: dict[str, str]  # set before start


LEVELS = {
    level.name: level
    for level in (
        Level(
            "x86-64-v3",
            ("avx2", "fma"),
            {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
        ),
        Level(
            "x86-64-v2",
            ("sse4_2",),
            {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"},
        ),
        Level("native", (), {}),
    )
}
DEFAULT_LEVEL = "x86-64-v3"


def level(name: str, cpu_flags: set[str] | None = None) -> Level:
    """The level called ``name``; refused in one line when unknown, or when this CPU (its
    ``/proc/cpuinfo`` flags, where known) lacks an instruction set the level runs."""
    found = LEVELS.get(name)
    if found is None:
        raise UserError(f"unknown portable level '{name}'; choose {', '.join(LEVELS)}")
    if cpu_flags:
        missing = [f for f in found.requires if f not in cpu_flags]
        if missing:
            raise UserError(f"this CPU cannot run portable level {name}: it lacks {', '.join(missing)}")
    return found


def level_of(env: dict[str, str]) -> str | None:
    """The level whose every variable ``env`` has (``None``: none, or native)."""
    for found in LEVELS.values():
        if found.env and all(env.get(k) == v for k, v in found.env.items()):
            return found.name
    return None
