"""``python -m samebits.offline.worker``: one predict worker (offline/workers.py). The first line
on stdin is the job; then each line is a shard index to compute, and each answer one JSON line
on stdout: ``{"ready": ...}`` once, ``{"done": entry}`` per shard, or ``{"error": ...}``. What
the model prints goes to stderr, never into the protocol."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")  # the real stdout, for the protocol alone
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    job = json.loads(sys.stdin.readline())
    from samebits.errors import UserError, first_line

    try:
        _serve(job, send)
    except UserError as exc:
        send({"error": str(exc)})
    except Exception as exc:
        send({"error": f"internal error in a predict worker: {first_line(exc, with_type=True)}", "internal": True})


def _serve(job: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
    from samebits.offline.workers import ShardWorker

    with ShardWorker(job) as worker:
        send({"ready": worker.identity})
        for line in sys.stdin:
            send({"done": worker.shard(int(line))})


if __name__ == "__main__":
    main()
