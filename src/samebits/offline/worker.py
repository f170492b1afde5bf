"""The ``shard`` task of a child process (``python -m samebits.child shard``): one predict worker
of ``samebits predict --workers K`` (offline/workers.py is the parent's side). After ``ready``,
each request names a shard index and each reply is its manifest entry (``done``)."""

from __future__ import annotations

from samebits.measure.job import Job, Reply
from samebits.measure.wire import Channel


def shard(job: Job, channel: Channel) -> None:
    """Build the worker ``job.params`` describes, answer ``ready``, then compute each shard asked
    for until the parent closes the pipe."""
    from samebits.errors import UserError, first_line
    from samebits.offline.workers import ShardWorker

    try:
        with ShardWorker(job.params) as worker:
            channel.send(Reply({"ready": worker.identity}).message())
            while True:
                try:
                    index = int(channel.receive().header["shard"])
                except EOFError:  # no more work
                    break
                channel.send(Reply({"done": worker.shard(index)}).message())
    except UserError as exc:
        channel.send(Reply(error=str(exc)).message())
    except Exception as exc:
        error = f"internal error in a predict worker: {first_line(exc, with_type=True)}"
        channel.send(Reply(error=error, internal=True).message())
