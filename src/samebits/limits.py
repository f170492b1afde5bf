"""Bounds on numbers samebits reads from files and command lines before they reach torch (a
thread count of 100000 segfaults ``torch.set_num_threads``)."""

from __future__ import annotations

import os

from samebits.errors import UserError


class OutOfRange(UserError, ValueError):
    """A number outside the range samebits accepts (a user error, and a ``ValueError``)."""


def max_threads() -> int:
    """The most intra-op threads samebits sets: four per core of this machine."""
    return 4 * (os.cpu_count() or 1)


MAX_BATCH = 1 << 20  # rows in one forward, calibration or shard: far past any batch that fits memory


def batch_rows(value: object, what: str = "batch size") -> int:
    """``value`` as a number of rows from 1 to :data:`MAX_BATCH`; a one-line error otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise OutOfRange(f"{what} must be a whole number of rows from 1 to {MAX_BATCH}, not {value!r}")
    return value


def thread_count(value: object, what: str = "threads") -> int:
    """``value`` as a thread count from 1 to :func:`max_threads`; a one-line error naming
    ``what`` (the flag or the file field it came from) otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= max_threads():
        raise OutOfRange(
            f"{what} must be a whole number of threads from 1 to {max_threads()} (4 per core here), not {value!r}"
        )
    return value
