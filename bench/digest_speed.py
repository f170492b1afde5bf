"""Digest algorithms side by side on float32 tensors of 1 KB to 100 MB: sha256 (hashlib), BLAKE3
(if the ``blake3`` package is installed) and xxh3-128 (``xxhash``), each over the same bytes, plus
one ``tensor.sum()`` pass for scale. samebits digests traces with the fastest and files with sha256.

Run: python bench/digest_speed.py
"""

from __future__ import annotations

import hashlib
import time

import torch
import xxhash


def algorithms() -> dict:
    found = {"sha256": hashlib.sha256, "xxh3-128": xxhash.xxh3_128}
    try:
        import blake3

        found["blake3"] = blake3.blake3
    except ImportError:
        pass
    return found


def seconds(fn, nbytes: int) -> float:
    repeats = max(3, min(2000, int(2e8 // max(nbytes, 1))))
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    algos = algorithms()
    print(f"{'size':>10}" + "".join(f"{name:>14}" for name in [*algos, "sum()"]) + "   (GB/s)")
    for nbytes in (1024, 65536, 1 << 20, 16 << 20, 100 << 20):
        t = torch.randn(nbytes // 4)
        view = memoryview(t.numpy()).cast("B")
        rates = [nbytes / seconds(lambda f=f: f(view).digest(), nbytes) / 1e9 for f in algos.values()]
        rates.append(nbytes / seconds(lambda: t.sum(), nbytes) / 1e9)
        label = f"{nbytes / 1024:.0f} KB" if nbytes < 1 << 20 else f"{nbytes >> 20} MB"
        print(f"{label:>10}" + "".join(f"{r:>14.2f}" for r in rates))


if __name__ == "__main__":
    main()
