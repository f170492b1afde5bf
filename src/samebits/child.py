"""``python -m samebits.child TASK``: the one entry of samebits' child processes. The parent
sends a :class:`~samebits.measure.job.Job` as the first message on the child's stdin
(:mod:`samebits.measure.wire`); the child answers on its real stdout (what the model prints goes
to stderr, never into the protocol). One-shot tasks answer one
:class:`~samebits.measure.job.Reply`; session tasks (``serve``, ``shard``) answer ``ready`` and
then one reply per request until the parent closes the pipe. ``TASK`` on the command line names
the process for ``ps``; the job says what runs."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from samebits.exit_codes import exit_past_user_threads
from samebits.measure.job import Job, Reply
from samebits.measure.wire import Channel

# task name -> (kind, "module:function"). A model task gets the loaded model, inputs and job and
# returns a reply; a plain task gets the job and the channel and returns a reply or ``None`` (a
# session that answered on the channel itself). Modules are imported only for the task that runs.
TASKS: dict[str, tuple[str, str]] = {
    "trace": ("model", "samebits.measure.tasks:trace"),
    "memory": ("model", "samebits.measure.tasks:memory"),
    "generate": ("model", "samebits.measure.tasks:generate"),
    "time": ("model", "samebits.measure.tasks:time"),
    "peak": ("model", "samebits.runtime.tasks:peak"),
    "probe": ("plain", "samebits.measure.tasks:probe"),
    "serve": ("plain", "samebits.serve.worker:serve"),
    "shard": ("plain", "samebits.offline.worker:shard"),
}


def _function(task: str) -> tuple[str, Any]:
    if task not in TASKS:
        raise ValueError(f"unknown child task {task!r}; this entry knows {', '.join(TASKS)}")
    kind, where = TASKS[task]
    module, _, name = where.partition(":")
    return kind, getattr(importlib.import_module(module), name)


def run(job: Job, channel: Channel) -> Reply | None:
    """Run ``job``'s task: set its threads, load and wrap its model where the task needs one."""
    kind, function = _function(job.task)
    if job.threads:
        import torch

        from samebits.limits import thread_count

        torch.set_num_threads(thread_count(job.threads, "the job's threads"))
    if kind == "plain":
        return function(job, channel)
    from samebits.determinism.rng import seed_rngs
    from samebits.measure.tasks import load

    model, inputs, built = load(job)
    if job.runtime or job.batch_invariant:
        from samebits.runtime.tasks import wrap

        model = wrap(model, inputs, job)
    seed_rngs(job.seed)
    reply: Reply = function(model, inputs, job)
    if built and job.task == "trace":
        reply.data["weights"] = built
    return reply


def failure(exc: BaseException) -> Reply:
    """An exception as a reply: the user's error in its words, any other with its type and place."""
    from samebits.errors import UserError, first_line

    if isinstance(exc, UserError):
        return Reply(error=str(exc))
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
    return Reply(error=f"{first_line(exc, with_type=True)}{where}", internal=True)


def main(argv: list[str] | None = None) -> None:
    """Read the job, run it, answer. The parent reads the reply; the exit code says the same for
    whoever reads the process table: 2 for the user's error, 3 for any other."""
    args = sys.argv[1:] if argv is None else argv
    out = os.fdopen(os.dup(1), "wb")  # the real stdout, for the protocol alone
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel = Channel(sys.stdin.buffer, out)
    code = 0
    try:
        try:
            job = Job.from_message(channel.receive())
            if args and args[0] != job.task:
                raise ValueError(f"started as {args[0]!r} but sent a {job.task!r} job")
            reply = run(job, channel)
        except BaseException as exc:  # every failure goes to the parent as data
            reply = failure(exc)
        if reply is not None:
            code = 0 if reply.error is None else 3 if reply.internal else 2
            _answer(channel, reply)
    except BaseException:
        code = 3
    finally:
        exit_past_user_threads(code)  # a thread the model's factory started must not hold the parent waiting
    sys.exit(code)


def _answer(channel: Channel, reply: Reply) -> None:
    """Send ``reply``; one that cannot travel (data that is no JSON) is answered as that error."""
    try:
        channel.send(reply.message())
    except OSError:  # the parent is gone: nobody to answer
        pass
    except Exception as exc:  # nothing was written: the message is built whole before it is sent
        with contextlib.suppress(Exception):
            channel.send(failure(exc).message())
        raise


if __name__ == "__main__":
    main()
