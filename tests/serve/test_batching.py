"""The batching queue on its own: grouping by key, limits, errors, cancellation."""

import asyncio
import threading
import time

import pytest

from aiayn.serve.batching import BatchQueue, QueueFull


def _gather(queue, jobs):
    async def main():
        futures = [queue.submit(items, run, key)[1] for items, run, key in jobs]
        return await asyncio.gather(*futures, return_exceptions=True)

    return asyncio.run(main())


def test_jobs_with_one_key_share_a_call_and_each_gets_its_share():
    calls = []

    def double(items):
        calls.append(list(items))
        return [2 * x for x in items]

    queue = BatchQueue("m", max_batch=5, max_wait=0.2)
    jobs = [([1, 2], double, "a"), ([3], double, "a"), ([4], double, "b"), ([5, 6, 7], double, "a")]
    try:
        results = _gather(queue, jobs)
    finally:
        queue.close()
    assert results == [[2, 4], [6], [8], [10, 12, 14]]
    assert sorted(calls) == [[1, 2, 3], [4], [5, 6, 7]]  # key a: 3 items, then 3 more over 5


def test_key_none_runs_alone_and_an_error_reaches_only_its_batch():
    def run(items):
        if "bad" in items:
            raise ValueError("bad item")
        return items

    queue = BatchQueue("m", max_wait=0.1)
    try:
        results = _gather(queue, [(["x"], run, None), (["bad"], run, "k"), (["y"], run, None)])
    finally:
        queue.close()
    assert results[0] == ["x"] and results[2] == ["y"]
    assert isinstance(results[1], ValueError)


def test_a_full_queue_refuses_and_a_cancelled_job_is_skipped():
    release, ran = threading.Event(), []

    def held(items):
        release.wait(10)
        ran.extend(items)
        return items

    queue = BatchQueue("m", max_pending=1, max_wait=0)

    async def main():
        _, first = queue.submit(["first"], held)
        while queue.depth:  # the worker holds the first job
            await asyncio.sleep(0.01)
        second_job, _ = queue.submit(["second"], held)
        with pytest.raises(QueueFull):
            queue.submit(["third"], held)
        second_job.cancelled = True
        release.set()
        return await first

    try:
        assert asyncio.run(main()) == ["first"]
    finally:
        queue.close()
    assert ran == ["first"]


def test_a_job_given_up_leaves_the_queue_at_once_and_a_running_one_is_answered():
    """``cancel`` takes a waiting job out of the queue now (not when a worker reaches it: a
    full queue has room again); a job whose batch runs is answered all the same, and its
    ``started_at`` says when its batch began."""
    release, ran = threading.Event(), []

    def held(items):
        assert release.wait(30)
        ran.extend(items)
        return items

    queue = BatchQueue("m", max_pending=1, max_wait=0)

    async def main():
        running, first = queue.submit(["first"], held)
        while queue.depth:  # the worker holds the first job
            await asyncio.sleep(0.01)
        waiting, second = queue.submit(["second"], held)
        assert waiting.started_at is None and queue.outstanding == 2
        queue.cancel(waiting)
        assert queue.depth == 0 and queue.outstanding == 1 and second.cancelled()
        _, third = queue.submit(["third"], held)  # room for it now
        queue.cancel(running)
        release.set()
        return running, await first, await third

    try:
        running, first, third = asyncio.run(main())
    finally:
        queue.close(timeout=10)
    assert (first, third) == (["first"], ["third"]) and ran == ["first", "third"]
    assert running.queued_at <= running.started_at


def _timed_queue(max_wait, hold=0.0, workers=1):
    """A queue whose run records [start time, items, end time] and holds each call ``hold``
    seconds (a list: the first calls hold its seconds in turn, the later ones its last)."""
    runs = []
    holds = hold if isinstance(hold, list) else [hold]

    def run(items):
        record = [time.monotonic(), list(items), None]
        runs.append(record)
        time.sleep(holds[min(len(runs), len(holds)) - 1])
        record[2] = time.monotonic()
        return items

    return BatchQueue("m", max_wait=max_wait, workers=workers), run, runs


def test_a_lone_client_is_not_kept_waiting_for_company():
    queue, run, runs = _timed_queue(max_wait=0.2)
    waits = []

    async def main():
        for i in range(5):  # one request after another, 0.45 s apart: no company comes
            job, future = queue.submit([i], run, "k")
            await future
            waits.append(runs[-1][0] - job.queued_at)
            await asyncio.sleep(0.45)

    try:
        asyncio.run(main())
    finally:
        queue.close()
    assert waits[0] >= 0.15  # a first request waits for company, as requests in a burst do
    assert max(waits[-2:]) < 0.75 * 0.2  # once arrivals are seen to be far apart, none waits


def test_a_job_queued_behind_a_running_batch_starts_when_it_ends():
    queue, run, runs = _timed_queue(max_wait=0.3, hold=0.6)

    async def main():
        first = queue.submit(["a"], run, "k")[1]
        while not runs:  # the first call has started (after its wait)
            await asyncio.sleep(0.01)
        second = queue.submit(["b"], run, "k")[1]  # waits 0.6 s behind the running call
        await asyncio.gather(first, second)

    try:
        asyncio.run(main())
    finally:
        queue.close()
    (_, _, first_end), (second_start, items, _) = runs
    assert items == ["b"]
    assert second_start - first_end < 0.2  # not another 0.3 s of waiting


def _closed_loop(queue, run, runs, first: list, behind: list, back: int, after: float = 0.0):
    """``first`` jobs run as a batch; ``behind`` are queued while it runs; once it is
    answered, ``back`` of its clients send their next job at once (closed-loop clients), or
    ``after`` seconds later."""

    async def main():
        started = [queue.submit([x], run, "k")[1] for x in first]
        while not runs:  # the first batch has started
            await asyncio.sleep(0.005)
        waiting = [queue.submit([x], run, "k")[1] for x in behind]
        await asyncio.gather(*started)
        await asyncio.sleep(after)
        returned = [queue.submit([f"again {k}"], run, "k")[1] for k in range(back)]
        await asyncio.gather(*waiting, *returned)

    try:
        asyncio.run(main())
    finally:
        queue.close()


def test_a_batch_smaller_than_the_one_answered_waits_for_its_clients():
    # the batch runs 5x the wait: short; the job left behind it would otherwise run alone
    queue, run, runs = _timed_queue(max_wait=0.1, hold=0.5)
    _closed_loop(queue, run, runs, ["a", "b", "c"], ["x"], back=2)
    assert [len(items) for _, items, _ in runs] == [3, 3]
    assert runs[1][1] == ["x", "again 0", "again 1"]


def test_after_a_long_batch_the_next_waits_for_all_of_its_clients():
    # the batch runs 15x the wait: long; two cohorts of two would otherwise alternate
    queue, run, runs = _timed_queue(max_wait=0.02, hold=0.3)
    _closed_loop(queue, run, runs, ["a", "b"], ["x", "y"], back=2)
    assert [len(items) for _, items, _ in runs] == [2, 4]


def test_after_a_short_batch_cohorts_as_large_as_it_start_at_once():
    # the first batch runs 5x the wait: short; the later ones need not run long
    # its clients come back 0.2 s after its answer (within the 0.5 s wait): a batch that
    # waited for them would start then, with them (at once, they could join it or not, as
    # the threads happen to run)
    queue, run, runs = _timed_queue(max_wait=0.5, hold=[2.5, 0.05])
    _closed_loop(queue, run, runs, ["a", "b"], ["x", "y"], back=2, after=0.2)
    (_, _, first_end), (second_start, items, _) = runs[:2]
    assert items == ["x", "y"]  # the jobs queued behind it form the next batch
    assert second_start - first_end < 0.15  # no wait for the returning clients


@pytest.mark.parametrize("workers", [1, 2])
def test_with_two_workers_two_batches_decode_at_once(workers):
    """Each batch waits inside its call for the other's: only two workers can answer both
    (one worker runs the second batch after the first has given up waiting)."""
    # two workers meet at once; one worker's first batch gives up after its timeout
    both = threading.Barrier(2, timeout=10.0 if workers == 2 else 0.5)
    threads = set()

    def run(items):
        threads.add(threading.current_thread().name)
        both.wait()
        return items

    queue = BatchQueue("m", max_wait=0.01, workers=workers)
    try:
        results = _gather(queue, [(["a"], run, "a"), (["b"], run, "b")])
    finally:
        queue.close()
    if workers == 2:
        assert results == [["a"], ["b"]] and threads == {"batch-m-0", "batch-m-1"}
    else:
        assert all(isinstance(r, threading.BrokenBarrierError) for r in results)


def test_a_batch_forms_while_another_decodes_and_close_stops_every_worker():
    queue, run, runs = _timed_queue(max_wait=0.05, hold=1.0, workers=2)

    async def main():
        first = queue.submit(["a"], run, "k")[1]
        while not runs:  # the first batch decodes
            await asyncio.sleep(0.005)
        later = [queue.submit([x], run, "k")[1] for x in ("b", "c")]
        await asyncio.gather(first, *later)

    try:
        asyncio.run(main())
    finally:
        queue.close(timeout=5)
    (first_start, _, first_end), (second_start, items, _) = runs[:2]
    assert items[0] == "b" and second_start < first_end  # not behind the first
    assert not any(t.is_alive() for t in queue._threads)
    with pytest.raises(ValueError, match="at least one worker"):
        BatchQueue("m", workers=0)


@pytest.mark.parametrize("workers", [1, 2])
def test_several_workers_split_the_load_between_them(workers):
    """Eight jobs at once: one worker takes them as one batch; two take three each side by
    side, and the rest after (one batch of eight would leave the other worker idle)."""
    queue, run, runs = _timed_queue(max_wait=0.2, hold=0.3, workers=workers)

    async def main():
        with queue._cond:  # all eight queued before a worker looks (a loaded machine)
            futures = [queue.submit([x], run, "k")[1] for x in range(8)]
        return await asyncio.gather(*futures)

    try:
        assert asyncio.run(main()) == [[x] for x in range(8)]
    finally:
        queue.close(timeout=5)
    sizes = [len(items) for _, items, _ in runs]
    if workers == 1:
        assert sizes == [8]
    else:
        assert sizes == [3, 3, 2]
        (first_start, _, first_end), (second_start, _, _) = runs[:2]
        assert second_start < first_end  # side by side
    assert queue.outstanding == 0


def test_cancelled_jobs_leave_the_load_a_batch_is_shared_by():
    release = threading.Event()

    def held(items):
        release.wait(10)
        return items

    queue = BatchQueue("m", max_wait=0, workers=2)

    async def main():
        first = queue.submit(["first"], held, "k")[1]
        while queue.depth:  # a worker holds the first job
            await asyncio.sleep(0.01)
        later = [queue.submit([x], held, "k") for x in range(6)]
        assert queue.outstanding == 7 and queue.share() == 4  # no wait: every batch is long
        for job, _ in later:
            job.cancelled = True
        release.set()
        return await first

    try:
        assert asyncio.run(main()) == ["first"]
        deadline = time.monotonic() + 5
        while queue.outstanding and time.monotonic() < deadline:
            time.sleep(0.01)  # the workers drop the cancelled jobs
    finally:
        queue.close(timeout=5)
    assert queue.outstanding == 0


def test_after_a_long_batch_the_load_splits_in_as_many_parts_as_workers():
    """Three clients on two workers after a batch 30x the wait: two and one side by side (in
    three parts, as after short batches, the third would wait a whole batch)."""
    queue, run, runs = _timed_queue(max_wait=0.01, hold=0.3, workers=2)

    async def main():
        await queue.submit(["first"], run, "k")[1]
        with queue._cond:
            futures = [queue.submit([x], run, "k")[1] for x in "abc"]
        return await asyncio.gather(*futures)

    try:
        assert asyncio.run(main()) == [["a"], ["b"], ["c"]]
    finally:
        queue.close(timeout=5)
    assert [items for _, items, _ in runs[1:]] == [["a", "b"], ["c"]]
    (_, _, first_end), (second_start, _, _) = runs[1:]
    assert second_start < first_end  # side by side


def test_the_load_a_batch_is_shared_by_is_its_most_over_the_last_second(monkeypatch):
    queue = BatchQueue("m", max_wait=0.01, workers=2)  # batches far shorter than 10x that

    async def main():
        with queue._cond:
            futures = [queue.submit([x], lambda items: items, "k")[1] for x in range(6)]
        await asyncio.gather(*futures)
        assert queue.outstanding == 0 and queue.share() == 2  # six, held (in three parts)
        monkeypatch.setattr("aiayn.serve.batching.PEAK_HOLD", 0.0)
        await queue.submit(["later"], lambda items: items, "k")[1]  # a new second: one
        assert queue.share() == 1

    try:
        asyncio.run(main())
    finally:
        queue.close(timeout=5)


def test_the_load_is_counted_down_after_errors_lone_jobs_and_a_failing_observer():
    def boom(items):
        raise ValueError("no")

    queue = BatchQueue("m", max_wait=0, workers=2)
    seen = []

    def observer(items, jobs, seconds):
        seen.append(items)
        raise RuntimeError("the observer fails")

    async def main():
        failed = queue.submit(["x"], boom, "k")[1]
        alone = queue.submit(["y", "z"], lambda items: items, None)[1]
        results = await asyncio.gather(failed, alone, return_exceptions=True)
        assert isinstance(results[0], ValueError) and results[1] == ["y", "z"]
        queue.on_batch = observer
        answer = queue.submit(["w"], lambda items: items, "k")[1]
        assert await asyncio.wait_for(answer, 10) == ["w"]

    try:
        asyncio.run(main())
    finally:
        queue.close(timeout=5)
    assert queue.outstanding == 0 and seen == [1]
