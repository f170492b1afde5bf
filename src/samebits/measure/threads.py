"""Whether the threads axis can run in this process: ``torch.set_num_threads`` must govern every
thread pool a forward uses, as ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` would at start-up.

torch's ``set_num_threads`` sets the OpenMP pool and, in MKL builds, MKL's; another BLAS
(OpenBLAS, Accelerate) keeps the count it read at start, and a runtime (ONNX Runtime) has its
own pool. Those cases keep fresh interpreters."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator

import torch

from samebits.limits import thread_count


@functools.lru_cache(maxsize=1)
def _blas() -> str:
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return match.group(1) if match else "unknown"


def in_process_reason(runtime: str | None) -> str | None:
    """Why the threads axis needs fresh interpreters here, or ``None`` when it can run in-process."""
    if runtime:
        return f"the {runtime} runtime has its own thread pool, sized at start-up"
    if _blas() != "mkl":
        return f"this torch's BLAS ({_blas()}) keeps the thread count it read at start-up"
    return None


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` while the block runs; the count before is put back. A count
    outside 1..4 per core is a one-line error (torch would crash on some)."""
    n = thread_count(n)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
