"""Batches made ready ahead of the step, in a background thread."""

import threading

import pytest

from aiayn.train.prefetch import Prefetcher, Ready


class Counted(list):
    """A group of batches (ints) that counts its tokens without collating."""

    def n_tokens(self, i):
        return self[i] * 10


def test_the_prefetcher_yields_each_rank_its_share_in_order():
    groups = [Counted([4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3]) for k in range(6)]
    with Prefetcher(groups, start=2, rank=1, world_size=2) as ahead:
        got = list(ahead)
    assert [g.mine for g in got] == [[4 * k + 1, 4 * k + 3] for k in range(2, 6)]
    assert [g.n_tokens for g in got] == [10 * sum(groups[k]) for k in range(2, 6)]
    assert got[0] == Ready.of(groups[2], 1, 2)


def test_leaving_early_stops_the_thread_and_errors_reach_the_loop():
    groups = [Counted([k]) for k in range(1000)]
    with Prefetcher(groups, 0, 0, 1, depth=1) as ahead:
        ready = next(iter(ahead))
        thread = ahead.thread
    assert ready.mine == [0] and not thread.is_alive()

    class Broken(list):
        def __getitem__(self, i):
            if isinstance(i, int) and i == 2:
                raise OSError("the store's disk went away")
            return super().__getitem__(i)

    with pytest.raises(OSError, match="disk went away"):
        with Prefetcher(Broken([Counted([1]), Counted([2]), Counted([3])]), 0, 0, 1) as ahead:
            list(ahead)
    assert not any(t.name == "aiayn-prefetch" for t in threading.enumerate())


def test_the_store_pages_of_each_step_are_released_once_it_is_collated():
    """A batch of a large store maps megabytes of it (fault-around): they leave the resident
    set after every step, not after many."""
    released = []

    class Released(Counted):
        def release(self):
            released.append(self[0])

    groups = [Released([k]) for k in range(5)]
    with Prefetcher(groups, 0, 0, 1, depth=1) as ahead:
        list(ahead)
    assert released == [0, 1, 2, 3, 4]
