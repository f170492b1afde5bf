"""Portable levels: the variables that make MKL, oneDNN and ATen take one baseline's code paths
on any x86 CPU that supports it, so that two CPUs of one level run the same kernels. The
libraries read them when they load: they are set before the process starts (``samebits run
--portable``, or a samebits command that starts itself again under them), never in a running one.

Measured on torch 2.13 (docs/portable.md): MKL's CNR mode alone keeps ``AUTO``'s thread-count
dependence in GEMM (a Linear at 1 and 2 threads differs under ``MKL_CBWR=AVX2``); its ``STRICT``
variant does not, so the levels use it."""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.pystart import module_argv

# every variable a level or a simulated machine sets; a "native" child has them removed
CODE_PATH_VARS = (
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
)


@dataclasses.dataclass(frozen=True)
class Level:
    """A named x86-64 baseline: what a CPU needs to run it, what pins it, and how a CPU of exactly
    this baseline is simulated on a bigger one (its instruction sets capped, no CNR mode)."""

    name: str
    requires: tuple[str, ...]  # /proc/cpuinfo flags a CPU needs to run it
    env: dict[str, str]  # set before start: the level
    machine: dict[str, str]  # set before start: a CPU whose best is this baseline, unpinned


LEVELS = {
    level.name: level
    for level in (
        Level(
            "x86-64-v3",
            ("avx2", "fma"),
            {"MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
            {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
        ),
        Level(
            "x86-64-v2",
            ("sse4_2",),
            {"MKL_CBWR": "COMPATIBLE,STRICT", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"},
            {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"},
        ),
        Level("native", (), {}, {}),
    )
}
DEFAULT_LEVEL = "x86-64-v3"
NATIVE = "native"
_X86 = ("x86_64", "amd64", "i686", "x86")


def _cpuinfo_text() -> str:
    """``/proc/cpuinfo`` (or the file named by ``$SAMEBITS_CPUINFO``, which describes another CPU:
    the tests' "other machine"); empty where unreadable."""
    try:
        return Path(os.environ.get("SAMEBITS_CPUINFO") or "/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def read_cpuinfo() -> tuple[str | None, set[str]]:
    """This CPU's model name and flags (:func:`_cpuinfo_text`)."""
    text = _cpuinfo_text()
    model = re.search(r"(?m)^(?:model name|Model|Hardware)\s*:\s*(.+)$", text)
    flags = re.search(r"(?m)^(?:flags|Features)\s*:\s*(.+)$", text)
    return (model.group(1).strip() if model else None), set(flags.group(1).split() if flags else ())


def cpu_vendor(model: str | None = None) -> str | None:
    """This CPU's vendor as the CPU names itself (``GenuineIntel``, ``AuthenticAMD``), from
    ``/proc/cpuinfo``; given ``model``, the vendor a model name says (fingerprints from before
    samebits recorded the vendor). Under a portable level it still changes bits: MKL applies its
    CNR branches other than ``COMPATIBLE`` only on Intel CPUs (docs/portable.md)."""
    if model is None:
        found = re.search(r"(?m)^vendor_id\s*:\s*(\S+)", _cpuinfo_text())
        return found.group(1) if found else None
    lower = model.lower()
    return "GenuineIntel" if "intel" in lower else "AuthenticAMD" if "amd" in lower else None


def cpu_flags() -> set[str]:
    """This CPU's ``/proc/cpuinfo`` flags (empty where unknown)."""
    return read_cpuinfo()[1]


def level(name: str, flags: set[str] | None = None) -> Level:
    """The level called ``name``; refused in one line when unknown, on a CPU that is no x86, or
    when this CPU (its ``/proc/cpuinfo`` flags, where known) lacks an instruction set it runs."""
    found = LEVELS.get(name)
    if found is None:
        raise UserError(f"unknown portable level '{name}'; choose {', '.join(LEVELS)}")
    if found.requires and platform.machine().lower() not in _X86:
        raise UserError(f"portable level {name} is an x86-64 baseline; this CPU is {platform.machine()}")
    if flags:
        missing = [f for f in found.requires if f not in flags]
        if missing:
            raise UserError(f"this CPU cannot run portable level {name}: it lacks {', '.join(missing)}")
    return found


def level_of(env: dict[str, str]) -> str | None:
    """The level whose every variable ``env`` has (``None``: none, or native)."""
    for found in LEVELS.values():
        if found.env and all(env.get(k) == v for k, v in found.env.items()):
            return found.name
    return None


def started_environment() -> dict[str, str]:
    """The environment this process started with (``/proc/self/environ``): what the libraries
    read when they loaded, whatever ``os.environ`` says now. ``os.environ`` where unreadable."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return dict(os.environ)
    pairs = (item.decode(errors="surrogateescape").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def active_level() -> str | None:
    """The portable level this process started under, or ``None``."""
    return level_of(started_environment())


def require(name: str | None) -> str | None:
    """Check that this process runs portable level ``name``; the level (``None`` for native or
    none). A running process cannot take a level: MKL, oneDNN and ATen read it when they load."""
    if name is None:
        return None
    found = level(name, cpu_flags())
    if found.name == NATIVE:
        return None
    if active_level() != found.name:
        pins = " ".join(f"{k}={v}" for k, v in found.env.items())
        raise UserError(
            f"portable level {found.name} cannot be applied in a running process: MKL, oneDNN and ATen read "
            f"{pins} when they load; start the process with `samebits run --portable {found.name} -- CMD`"
        )
    return found.name


def machines(under: str | None, flags: set[str]) -> list[tuple[str, dict[str, str]]]:
    """The CPUs the ``machine`` axis simulates on this one, each as (label, environment before
    start): this CPU, then every baseline below it that this CPU can run; under a level, only the
    CPUs that can run it, each running it."""
    pinned = LEVELS[under].env if under else {}
    native = {k: "" for k in CODE_PATH_VARS if k not in pinned}  # "" removes the variable
    out = [("this CPU" + (f" under {under}" if under else ""), {**native, **pinned})]
    ranked = [LEVELS[n] for n in LEVELS if n != NATIVE]
    floor = [lv.name for lv in ranked].index(under) if under else len(ranked) - 1
    for i, lv in enumerate(ranked[: floor + 1]):
        above = ("avx512f",) if i == 0 else ranked[i - 1].requires  # what this CPU has beyond lv
        if not all(f in flags for f in above):
            continue  # this CPU is such a CPU: simulating it runs this CPU again
        if all(f in flags for f in lv.requires):
            label = f"an {lv.name} CPU" + (f" under {under}" if under else "")
            out.append((label, {**native, **lv.machine, **pinned}))
    return out


def ray_options(name: str | None) -> dict[str, Any]:
    """Ray's options that start a worker process under level ``name`` (its variables set before
    the worker starts, as the libraries need); none for ``None``."""
    return {"runtime_env": {"env_vars": dict(LEVELS[name].env)}} if name else {}


def reexec_under(name: str, argv: list[str]) -> None:
    """Start this samebits command again (exec: same process id) with level ``name`` set before
    start. Refused when the command already ran under a level it then could not see."""
    found = LEVELS[name]
    if os.environ.get("SAMEBITS_PORTABLE_STARTED") == name:
        raise UserError(f"portable level {name} was set before start but this process does not run it")
    env = {**os.environ, **found.env, "SAMEBITS_PORTABLE_STARTED": name}
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [*module_argv("samebits"), *argv]
    os.execve(argv[0], argv, env)
