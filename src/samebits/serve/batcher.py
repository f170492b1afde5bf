"""The dynamic batcher: requests (each one or more rows) are joined into one batch and run
through one :class:`~samebits.runtime.Predictor` in one worker thread, off the event loop.

An idle worker takes what is queued at once (no wait at concurrency 1); while it is busy, new
requests queue, and when it is done it takes up to ``max_batch_size`` rows, waiting at most
``max_wait_ms`` for more only when the queue filled during the last batch. The Predictor runs
only batch sizes it has verified, so every row's bits equal ``predict_one`` on that sample,
whatever else shared its batch."""

from __future__ import annotations

import asyncio
import contextlib
import concurrent.futures
import dataclasses
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from samebits.errors import first_line
from samebits.measure.spawn import ChildDied
from samebits.measure.batching import batch_size_of, concat_batches, output_rows
from samebits.models.inputs import ModelInputs
from samebits.runtime.plan import Restartable
from samebits.serve.options import ServeOptions


class QueueFull(RuntimeError):
    """More rows are queued than ``max_queue`` allows (status 503, Retry-After)."""


class TooLarge(ValueError):
    """One request has more rows than the queue can ever hold (status 413: a retry cannot help)."""


class TimedOut(RuntimeError):
    """The request waited in the queue longer than ``timeout_s`` (status 504)."""


class ForwardFailed(RuntimeError):
    """The forward of this request's rows raised, alone (status 500); a batch that fails is
    retried request by request, so the requests it shared a batch with are answered."""


class Draining(RuntimeError):
    """The server is shutting down and takes no new requests (status 503)."""


class Stuck(RuntimeError):
    """The forward of this request's batch ran past ``forward_timeout_s`` (status 503)."""


@dataclasses.dataclass
class _Item:
    inputs: ModelInputs
    rows: int
    future: asyncio.Future[Any]
    queued: float


class Batcher:
    """Batch requests for one Predictor (``predict(batch) -> output``, rows along dim 0)."""

    def __init__(
        self,
        predict: Callable[[ModelInputs], Any],
        *,
        max_batch_size: int,
        max_wait_ms: float = 1.0,
        max_queue: int = 1024,
        timeout_s: float = 30.0,
        forward_timeout_s: float = 60.0,
        on_batch: Callable[[int, float], None] | None = None,
        worker: Restartable | None = None,
        key: Callable[[ModelInputs], Hashable] | None = None,
        joins: bool = True,
    ) -> None:
        self.predict = predict
        self.joins = joins  # False: each request is its own batch (a model whose rows are coupled)
        self.key = key  # requests are batched only with the same key (a padded length)
        self.forward_timeout = forward_timeout_s
        self.stuck_since: float | None = None  # a forward past forward_timeout_s is still running
        self.worker = worker  # with kill() and restart(): a hung forward's process is replaced
        self.restarting = False
        self.restart_reason = ""
        self._watch: asyncio.Task[None] | None = None  # waits for a stuck forward in the thread
        self.broken: str | None = None  # the worker could not be restarted: nothing more is served
        self.max_batch_size, self.max_wait = max_batch_size, max_wait_ms / 1000.0
        self.max_queue, self.timeout = max_queue, timeout_s
        self.on_batch = on_batch or (lambda rows, seconds: None)
        self.queue: deque[_Item] = deque()
        self.queued_rows = 0
        self.draining = False
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samebits-worker")

    @classmethod
    def for_runner(
        cls,
        runner: Any,
        options: ServeOptions,
        on_batch: Callable[[int, float], None] | None = None,
        worker: Restartable | None = None,
        key: Callable[[ModelInputs], Hashable] | None = None,
    ) -> Batcher:
        """A batcher of ``runner``'s forwards with the limits of ``options`` (``samebits serve``'s
        flags) and the runner's plan's facts: a model whose rows are coupled (plan scheme
        ``whole``: CLIP's ``[B, B]`` logits) never has two requests joined. The HTTP app and the
        Ray replicas both make theirs here."""
        return cls.for_options(runner.predict, options, on_batch, worker, key, joins=runner.plan.scheme != "whole")

    @classmethod
    def for_options(
        cls,
        predict: Callable[[ModelInputs], Any],
        options: ServeOptions,
        on_batch: Callable[[int, float], None] | None = None,
        worker: Restartable | None = None,
        key: Callable[[ModelInputs], Hashable] | None = None,
        joins: bool = True,
    ) -> Batcher:
        """A batcher of ``predict`` with the limits of ``options`` (a runner's: :meth:`for_runner`)."""
        return cls(
            predict,
            max_batch_size=options.max_batch_size,
            max_wait_ms=options.max_wait_ms,
            max_queue=options.max_queue,
            timeout_s=options.timeout_s,
            forward_timeout_s=options.forward_timeout_s,
            on_batch=on_batch,
            worker=worker,
            key=key,
            joins=joins,
        )

    async def start(self) -> None:
        self._wake, self._idle = asyncio.Event(), asyncio.Event()
        self._idle.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, inputs: ModelInputs) -> Any:
        """The output rows for ``inputs`` (a batch of one or more rows), as the Predictor gives them."""
        if self.draining:
            raise Draining("the server is shutting down")
        if self._task is None:  # mounted in another app, whose lifespan does not start ours
            await self.start()
        rows = batch_size_of(inputs) or 1
        if rows > self.max_queue:
            raise TooLarge(f"the request has {rows} rows; at most {self.max_queue} can be queued (--max-queue)")
        if self.stuck_since is not None and self.worker is None:
            raise Stuck(
                f"a forward has been running for {time.monotonic() - self.stuck_since:.0f} s; no new work until it returns"
            )
        if self.queued_rows + rows > self.max_queue:
            raise QueueFull(f"{self.queued_rows} rows are queued (--max-queue {self.max_queue})")
        assert self._wake is not None and self._idle is not None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.append(_Item(inputs, rows, future, time.monotonic()))
        self.queued_rows += rows
        self._idle.clear()
        self._wake.set()
        return await future

    async def drain(self) -> None:
        """Take no new requests; return when every queued and running request is answered."""
        self.draining = True
        if self._idle is not None:
            await self._idle.wait()

    async def close(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
        # A forward stuck in the worker thread cannot be ended from Python: the thread is left to
        # it (the process exits without joining it, see serve()); otherwise wait for the thread.
        self._executor.shutdown(wait=self.stuck_since is None, cancel_futures=True)

    def _take(self) -> list[_Item]:
        batch: list[_Item] = []
        rows, first = 0, None
        now = time.monotonic()
        while self.queue and (
            not batch
            or (
                self.joins
                and rows + self.queue[0].rows <= self.max_batch_size
                and (self.key is None or self.key(self.queue[0].inputs) == first)
            )
        ):
            item = self.queue.popleft()
            self.queued_rows -= item.rows
            if item.future.done():  # the client went away
                continue
            if now - item.queued > self.timeout:
                item.future.set_exception(TimedOut(f"waited {now - item.queued:.1f} s in the queue (--timeout-s)"))
                continue
            if not batch and self.key is not None:
                first = self.key(item.inputs)
            batch.append(item)
            rows += item.rows
        return batch

    async def _recover(self, running: asyncio.Future[Any]) -> None:
        """After a forward ran past its timeout: kill and restart the worker process; in a thread
        (no worker), wait for the forward to return in the background while new requests get
        503 at once (the loop goes on answering; see :meth:`submit`)."""
        if self.worker is None:

            async def returned() -> None:
                try:
                    await running
                except asyncio.CancelledError:
                    return  # the server is ending while the forward still runs: it stays stuck
                except Exception:
                    pass
                self.stuck_since = None

            self._watch = asyncio.get_running_loop().create_task(returned())
            return
        self.worker.kill()
        with contextlib.suppress(Exception):
            await running
        await self._restart("after a forward hung")

    async def _restart(self, why: str) -> None:
        """A new worker process, from the same calibration; not ready meanwhile."""
        assert self.worker is not None
        self.restarting, self.restart_reason = True, why
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self.worker.restart)
        except Exception as exc:
            self.broken = f"the model's worker could not be restarted: {first_line(exc)}"
        finally:
            self.restarting = False
            if self.broken is None:
                self.stuck_since = None

    def watch_worker(self) -> None:
        """Where the worker process died (killed from outside, out of memory) and nothing is
        restarting it yet, start a new one: not ready until it is back."""
        if self.worker is not None and not self.worker.alive and not self.restarting and self.broken is None:
            self.restarting, self.restart_reason = True, "after it died"  # at once: no second restart
            self._watch = asyncio.get_running_loop().create_task(self._restart("after it died"))

    def _unavailable(self) -> str | None:
        """Why no forward can run now: the worker could not be restarted, or the one worker thread
        is busy with a forward that hangs; ``None`` where one can."""
        if self.broken is not None:
            return self.broken
        if self.stuck_since is not None and self.worker is None:
            return "a forward is still running past --forward-timeout-s"
        return None

    @staticmethod
    def _fail(batch: list[_Item], error: BaseException) -> None:
        for item in batch:
            if not item.future.done():
                item.future.set_exception(error)

    async def _timed(self, batch: list[_Item], inputs: Any) -> tuple[bool, Any]:
        """One forward of ``inputs`` in the worker under ``forward_timeout_s``: ``(True, output)``,
        or ``(False, None)`` where ``batch`` was answered 503 because the worker died or the
        forward ran past its timeout (then the worker is restarted, or the thread watched while
        new requests get 503 and readiness is off). A forward that raises raises here."""
        started = time.monotonic()
        running = asyncio.get_running_loop().run_in_executor(self._executor, self.predict, inputs)
        try:
            return True, await asyncio.wait_for(asyncio.shield(running), self.forward_timeout)
        except ChildDied as exc:  # the worker process died (killed from outside, out of memory)
            self._fail(batch, Stuck(f"{exc}; restarting it"))
            if self.worker is not None:
                await self._restart("after it died")
            return False, None
        except asyncio.TimeoutError:
            # Answer now (503). A thread cannot be killed: the server is not ready until the
            # forward returns, and its late result is dropped. A worker process (--isolate) is
            # killed and replaced; not ready until it is back.
            self.stuck_since = started
            self._fail(batch, Stuck(f"the forward ran past {self.forward_timeout:g} s (--forward-timeout-s)"))
            await self._recover(running)
            return False, None

    async def _alone(self, batch: list[_Item]) -> None:
        """After a batch's forward raised: each request's rows run alone, each under the forward
        timeout, so that one bad request fails only itself and one that hangs cannot hold the
        rest. A row's bits do not depend on its batch, so an output here is the one it would
        have had."""
        for i, item in enumerate(batch):
            if item.future.done():
                continue
            unavailable = self._unavailable()
            if unavailable is not None:
                self._fail(batch[i:], Stuck(unavailable))
                return
            try:
                ok, output = await self._timed([item], item.inputs)
            except Exception as exc:
                item.future.set_exception(ForwardFailed(first_line(exc, with_type=True)))
                continue
            if ok and not item.future.done():
                item.future.set_result(output_rows(output, 0, item.rows, item.rows))

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None
        under_load = False
        while True:
            if not self.queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                under_load = False
            if under_load and self.max_wait > 0 and self.queued_rows < self.max_batch_size:
                await asyncio.sleep(self.max_wait)  # the queue filled during the last batch: let it fill a little more
            batch = self._take()
            if not batch:
                continue
            unavailable = self._unavailable()
            if unavailable is not None:
                self._fail(batch, Stuck(unavailable))
                continue
            started = time.monotonic()
            try:
                joined = concat_batches([b.inputs for b in batch]) if len(batch) > 1 else batch[0].inputs
                ok, output = await self._timed(batch, joined)
                if not ok:
                    continue
                total, start = sum(b.rows for b in batch), 0
                for item in batch:
                    if not item.future.done():
                        item.future.set_result(output_rows(output, start, start + item.rows, total))
                    start += item.rows
            except Exception as exc:  # the batch failed: its requests run alone, so only a bad one fails
                if len(batch) > 1:
                    await self._alone(batch)
                else:
                    self._fail(batch, ForwardFailed(first_line(exc, with_type=True)))
            finally:
                self.on_batch(sum(b.rows for b in batch), time.monotonic() - started)
            under_load = bool(self.queue)
