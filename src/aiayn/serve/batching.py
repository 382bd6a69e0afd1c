"""Dynamic batching: one queue per model, served by one or more worker threads.

Requests put jobs (a list of items and the function that computes them) into their model's
queue; a worker takes the oldest job and the later ones with the same key (the same task and
decoding options), runs their items as one call, and hands each job its share of the results.
Inference thus runs off the event loop; the functions it calls decide how a batch is sorted
and cut. With several workers (``workers``: a model with as many decoders) one batch forms at
a time, while the others decode: the next batch gathers the requests that arrive meanwhile,
and a worker's decoding never waits for another's.

A job's ``started_at`` is set when a worker takes it into a batch (what a request's timeout
counts from: ``Registry.run``). A job given up (``cancel``: timed out, or its client gone)
leaves the queue at once if it still waits there; a batch already running goes on.

Waiting for company: a batch waits for more jobs until its oldest job has been queued
``max_wait`` seconds (so a job that already waited behind a running batch starts with what has
come meanwhile, at once), and only while jobs have lately been arriving less than ``max_wait``
apart: a lone client sending one request after another is not kept waiting for others once
its requests are seen to come further apart than that.

Waiting for the batch just answered: once a batch is answered, its clients (closed-loop, each
sending its next request on the answer) come back within a round trip. A job left behind that
batch would otherwise start at once, alone or nearly (a batch of 1 after one of 15, then 15
again: the half of the batches that decode one sentence cost as much as the rest at beam 4);
so a batch smaller than the last one waits up to ``max_wait`` after that answer for the
returning jobs, and starts as soon as it is as large as the last one was. After a long batch
(``LONG_BATCH`` times ``max_wait`` or more: beam search with the torch engine) the next waits
for all of its clients to join the jobs already waiting: closed-loop clients otherwise settle
into two cohorts, each batch half of them, while waiting costs a tenth of a batch at most.
After a short batch the two cohorts stay: one's requests and answers go through the event loop
while the other's decodes.

Sharing among workers: with several workers a batch takes at most a share of the load (the
items submitted and not yet answered, their most in the last ``PEAK_HOLD`` seconds) split in
as many parts as there are workers, and waits for no more than that; after a short batch, in
one part more. Otherwise closed-loop clients gather into one batch (a long one makes the next
wait for all of its clients) while the other workers wait for them. After short batches, with
as many parts as workers, each worker would wait for its own clients' answers and next
requests to pass the event loop, a round trip as long as a good part of the batch: the extra
part is the clients on their way back, queued by the time a worker is free. After a long
batch that round trip is short beside it, and a part more would only make a few clients wait
a whole batch for a free worker (three clients on two workers: batches of one, the third
behind).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("aiayn.serve")

GAP_WEIGHT = 0.25  # weight of the newest gap between arrivals in their moving average
# a batch that ran this many times max_wait makes the next wait for its clients (at most
# max_wait: a tenth of a batch at most, for a batch of all the clients rather than half)
LONG_BATCH = 10
PEAK_HOLD = 1.0  # seconds the most items outstanding counts as the load (several workers)


class QueueFull(Exception):
    """The model's queue holds ``max_pending`` jobs already."""


class QueueClosed(Exception):
    """The server is shutting down and takes no new work."""


@dataclass(eq=False)
class Job:
    """Items to compute with ``run`` (items -> one result per item).

    Jobs with the same ``key`` may share a call of ``run``; ``key`` None runs alone.
    """

    items: list
    run: Callable[[list], list]
    key: Hashable | None
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None  # time.monotonic() when a worker took it into a batch


def _resolve(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _resolve_all(answers: list) -> None:
    for future, result, error in answers:
        _resolve(future, result, error)


class BatchQueue:
    """A bounded job queue for one model, served by ``workers`` threads."""

    def __init__(
        self,
        name: str,
        max_batch: int = 64,
        max_wait: float = 0.005,
        max_pending: int = 256,
        on_batch: Callable[[int, int, float], None] | None = None,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a queue needs at least one worker, got {workers}")
        self.name = name
        self.max_batch, self.max_wait, self.max_pending = max_batch, max_wait, max_pending
        self.on_batch = on_batch  # (items, jobs, seconds) of every batch run
        self._pending: deque[Job] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._last_arrival = float("-inf")
        self._mean_gap = 0.0  # moving average of the time between arrivals (seconds)
        self._last_size, self._last_end = 0, float("-inf")  # the batch answered last
        self._last_seconds = 0.0  # and how long it ran
        self._workers = workers
        self._outstanding = 0  # items submitted and not yet answered
        self._peak, self._peak_at = 0, float("-inf")  # their most lately, and when
        self._forming = threading.Lock()  # held by the worker gathering the next batch
        self._threads = [
            threading.Thread(target=self._work, name=f"batch-{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def depth(self) -> int:
        """Jobs waiting (not yet taken by the worker)."""
        return len(self._pending)

    def submit(
        self, items: list, run: Callable[[list], list], key: Hashable | None = None
    ) -> tuple[Job, asyncio.Future]:
        """Queue a job from the event loop; its future receives the list of results."""
        loop = asyncio.get_running_loop()
        job = Job(items, run, key, loop.create_future(), loop)
        with self._cond:
            if self._closed:
                raise QueueClosed(f"model {self.name} is shutting down")
            if len(self._pending) >= self.max_pending:
                raise QueueFull(f"model {self.name} has {self.max_pending} requests waiting")
            self._pending.append(job)
            self._outstanding += len(items)
            if self._outstanding >= self._peak or job.queued_at - self._peak_at > PEAK_HOLD:
                self._peak, self._peak_at = self._outstanding, job.queued_at
            # a gap counts at most twice the wait: after idle time, a burst soon waits again
            gap = min(job.queued_at - self._last_arrival, 2 * self.max_wait)
            self._last_arrival = job.queued_at
            self._mean_gap += GAP_WEIGHT * (gap - self._mean_gap)
            self._cond.notify()
        return job, job.future

    def cancel(self, job: Job) -> None:
        """Give ``job`` up (on its event loop): out of the queue now if it waits there (its
        future cancelled: it never runs); if its batch runs, the batch goes on and its
        future gets its share, for the caller to drop."""
        with self._cond:
            job.cancelled = True
            try:
                self._pending.remove(job)
            except ValueError:  # taken into a batch (or answered) already
                return
            self._drop(job)
        job.future.cancel()

    def close(self, timeout: float | None = None) -> None:
        """Take no new jobs; the workers finish those queued, then stop (``timeout``: the
        longest to wait for them, in all)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        end = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if end is None else max(0.0, end - time.monotonic()))

    @property
    def outstanding(self) -> int:
        """Items submitted and not yet answered (waiting or decoding)."""
        return self._outstanding

    def share(self) -> int:
        """The most items a batch takes: with several workers, a share of the load (the
        module's docstring); one worker takes up to ``max_batch``."""
        if self._workers == 1:
            return self.max_batch
        load = max(self._outstanding, self._peak)
        parts = self._workers if self._after_long_batch else self._workers + 1
        return max(1, min(self.max_batch, -(-load // parts)))

    @property
    def _after_long_batch(self) -> bool:
        """Whether the batch answered last ran ``LONG_BATCH`` times ``max_wait`` or more."""
        return self._last_seconds >= LONG_BATCH * self.max_wait

    def _drop(self, job: Job) -> None:
        """A cancelled job leaves the queue unrun (with ``_cond`` held)."""
        self._outstanding -= len(job.items)

    def _take(self) -> list[Job] | None:
        """The next batch: the oldest live job and later ones with its key (None: closed)."""
        with self._cond:
            while True:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return None
                first = self._pending.popleft()
                if not first.cancelled:
                    break
                self._drop(first)
            batch, size = [first], len(first.items)
            if first.key is None:
                return batch
            deadline = first.queued_at + self.max_wait  # a job waits max_wait in all
            if self._mean_gap >= self.max_wait:  # no company is likely to come in time
                deadline = 0.0
            returning = self._last_end + self.max_wait  # until the last batch's clients are back
            target, limit = None, self.share()
            while size < limit:
                for job in list(self._pending):
                    if job.cancelled:
                        self._pending.remove(job)
                        self._drop(job)
                    elif job.key == first.key and size + len(job.items) <= limit:
                        self._pending.remove(job)
                        batch.append(job)
                        size += len(job.items)
                now = time.monotonic()
                if target is None:  # what to wait for, of the batch answered last
                    target = 0
                    if now < returning and self._after_long_batch:
                        target = size + self._last_size  # its clients join what waits
                    elif now < returning:
                        target = self._last_size  # no batch smaller than it
                    target = min(target, limit)
                left = deadline - now
                if size < target:  # the jobs of the batch just answered are on their way
                    left = max(left, returning - now)
                if size >= limit or left <= 0 or self._closed:
                    break
                self._cond.wait(left)
            return batch

    def _next(self) -> list[Job] | None:
        with self._forming:  # one batch forms at a time; the other workers decode
            return self._take()

    def _work(self) -> None:
        while (batch := self._next()) is not None:
            items = [item for job in batch for item in job.items]
            start, started = time.perf_counter(), time.monotonic()
            for job in batch:
                job.started_at = started
            try:
                results, error = batch[0].run(items), None
                if len(results) != len(items):
                    raise RuntimeError(f"{len(results)} results for {len(items)} items")
            except Exception as e:  # the requests get the error; the worker goes on
                results, error = None, e
            if self.on_batch is not None:
                try:
                    self.on_batch(len(items), len(batch), time.perf_counter() - start)
                except Exception:  # an observer (metrics) stops neither answers nor worker
                    log.exception("model %s: the batch observer failed", self.name)
            self._answer(batch, items, results, error, started)

    def _answer(self, batch: list[Job], items: list, results, error, started: float) -> None:
        with self._cond:  # answered: its clients may come back (see the module)
            self._outstanding -= len(items)  # before they can: no double count
            self._last_size, self._last_end = len(items), time.monotonic()
            self._last_seconds = self._last_end - started
        answers: dict[asyncio.AbstractEventLoop, list] = {}  # one wake-up a loop
        offset = 0
        for job in batch:
            share = None if error else results[offset : offset + len(job.items)]
            offset += len(job.items)
            answers.setdefault(job.loop, []).append((job.future, share, error))
        for loop, answered in answers.items():
            try:
                loop.call_soon_threadsafe(_resolve_all, answered)
            except RuntimeError:  # the event loop is gone (shutdown)
                pass
