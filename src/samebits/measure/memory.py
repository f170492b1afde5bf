"""Memory growth when outputs are kept: run in a child process (RSS only grows within one), capped."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable
from typing import Any

import torch

from samebits.models.inputs import Model, ModelInputs


def default_memory_cap_mb(device: str = "cpu") -> float:
    """A quarter of the machine's memory, at most 2 GiB: a grad-on loop stops there. On CUDA a
    quarter of what this process may still take on the device: its free memory
    (``mem_get_info``; RAM says nothing of a GPU), and no more than the share
    ``set_per_process_memory_fraction`` left it (the allocator refuses past it, however much is
    free). On MPS a quarter of what Metal recommends less what the driver holds already."""
    if device.startswith("cuda"):
        return cuda_room_mb(torch.device(device)) / 4
    if device.startswith("mps") and (room := mps_room_mb()) is not None:
        return room / 4
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        total = 8192.0
    return min(2048.0, total / 4)


def cuda_room_mb(where: torch.device) -> float:
    """MB this process may still allocate on CUDA device ``where``: the device's free memory, capped
    by ``fraction x total`` less what this process holds (``get_per_process_memory_fraction``,
    where this torch has it)."""
    free, total = torch.cuda.mem_get_info(where)
    room = float(free)
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if fraction is not None:
        room = min(room, fraction(where) * total - torch.cuda.memory_reserved(where))
    return max(0.0, room) / 2**20


def mps_room_mb() -> float | None:
    """MB the MPS device may still take (Metal's recommended working set less what the driver
    holds), or ``None`` where this torch cannot say."""
    mps = getattr(torch, "mps", None)
    recommended = getattr(mps, "recommended_max_memory", None)
    held = getattr(mps, "driver_allocated_memory", None)
    if recommended is None or held is None:
        return None
    return max(0.0, float(recommended() - held())) / 2**20


def rss_mb() -> float:
    """This process's resident memory now (Linux ``/proc``), else its peak (``getrusage``)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**10 if os.uname().sysname != "Darwin" else peak / 2**20


def device_mb(device: str = "cpu") -> float:
    """Memory in use now: this process's RSS (CUDA: memory allocated on the device)."""
    if device.startswith("cuda"):
        return torch.cuda.memory_allocated(torch.device(device)) / 2**20
    return rss_mb()


def memory_growth(
    model: Model, inputs: ModelInputs, *, mode: str, iterations: int, cap_mb: float, device: str = "cpu"
) -> dict[str, Any]:
    """Run ``iterations`` forwards keeping every output, ``mode`` ``"as-is"`` (grad mode on, as a
    plain call runs) or ``"inference_mode"``; stop early once memory grew by ``cap_mb``."""
    kept = []
    context = torch.inference_mode() if mode == "inference_mode" else torch.enable_grad()
    with context:
        inputs.call(model)  # warm-up: allocator pools and lazy initialisation are not growth
    start = device_mb(device)
    capped, done = False, 0
    with context:
        for done in range(1, iterations + 1):
            kept.append(inputs.call(model))
            if device_mb(device) - start > cap_mb:
                capped = True
                break
    grown = device_mb(device) - start
    carries_grad = any(getattr(t, "grad_fn", None) is not None for t in _tensors(kept[-1])) if kept else False
    return {
        "mode": mode,
        "iterations": done,
        "grown_mb": round(grown, 2),
        "capped": capped,
        "carries_grad": carries_grad,
    }


def _tensors(obj: object) -> list[torch.Tensor]:
    from samebits.tensors.tree import flatten

    try:
        return [t for t in flatten(obj).values() if isinstance(t, torch.Tensor)]
    except TypeError:
        return []


def trim_heap() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``; elsewhere
    nothing): in a process that allocated and freed before, a forward reuses pages that are
    already resident, and its RSS would not grow by what it needs."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)


def reset_peak() -> bool:
    """Reset this process's peak RSS (Linux ``/proc/self/clear_refs``); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float:
    """This process's peak RSS since start or the last :func:`reset_peak`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**10 if os.uname().sysname != "Darwin" else peak / 2**20


def peak_of(run: Any, device: str = "cpu", since: float | None = None) -> float:
    """MB above ``since`` (default: what was in use just before) that running ``run()`` reached
    at its peak (CUDA: the peak of allocated memory)."""
    if device.startswith("cuda"):
        where = torch.device(device)  # cuda:N's statistics, not the current device's
        torch.cuda.reset_peak_memory_stats(where)
        before = torch.cuda.memory_allocated(where) / 2**20 if since is None else since
        run()
        return max(0.0, torch.cuda.max_memory_allocated(where) / 2**20 - before)
    trim_heap()
    reset_peak()
    rss = rss_mb() if since is None else since
    run()
    return max(0.0, peak_mb() - rss)


def largest_batch(
    model: Model, batch_at: Callable[[int], ModelInputs], budget_mb: float, device: str, limit: int = 4096
) -> tuple[int, dict[int, float]]:
    """(the largest power-of-two batch whose forward adds at most ``budget_mb`` to the peak
    (CUDA: the largest that does not run out of memory, the cache emptied after), the peak
    measured at each size tried)."""
    measured: dict[int, float] = {}
    best, size, out_of_memory = 1, 1, False
    while size <= limit:
        batch = batch_at(size)
        try:
            with torch.inference_mode():
                measured[size] = round(peak_of(lambda: batch.call(model), device), 2)
        except Exception as exc:
            if not out_of_memory_error(exc):
                raise
            out_of_memory = True  # emptied below: here the traceback still holds the forward's tensors
        if out_of_memory or measured[size] > budget_mb:
            break
        best, size = size, size * 2
    if out_of_memory:
        del batch
        torch.cuda.empty_cache()
    return best, measured


# what a device's allocation failure says where it is raised as a plain RuntimeError: cuBLAS and
# cuDNN failing to allocate their workspaces, cuBLAS's handle failing to start for lack of memory
# (NOT_INITIALIZED), the CUDA runtime's own error from a kernel's launch, MPS's allocator
OUT_OF_MEMORY = (
    "CUDA out of memory",
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_NOT_INITIALIZED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "MPS backend out of memory",
)


def out_of_memory_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the device ran out of memory: torch's own error, or one of
    :data:`OUT_OF_MEMORY` in a plain RuntimeError."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(s in text for s in OUT_OF_MEMORY)
