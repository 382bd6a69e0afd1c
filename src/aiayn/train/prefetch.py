"""Batches collated ahead of the step that needs them, in a background thread.

Collating a batch reads its ids from the token store's memory maps (numpy, which leaves the
GIL while it copies), so a thread keeps a few steps' batches ready while the model computes;
the loop measures the time it still waits (``Prefetcher.wait_s``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from aiayn.data.batching import pinned

# steps between dropping the store pages read so far from the process's resident set. A
# batch reads a few hundred scattered examples, and the kernel maps up to 64 KB around each
# page read (fault-around), so on a store of millions of pairs every batch maps megabytes of
# it; released every 16 steps, bench/scale.py's training peak at 4.5M pairs was 2,262 MB,
# every step 1,971 MB. The pages stay in the page cache: reading them again costs a minor
# fault.
RELEASE_EVERY = 1


def group_tokens(group: Sequence) -> int:
    """Target tokens of a group of batches: from the plan where it can count them without
    collating (the other ranks' batches), else from the batches."""
    if callable(getattr(group, "n_tokens", None)):
        return sum(group.n_tokens(i) for i in range(len(group)))
    return sum(b.n_tokens for b in group)


@dataclass(frozen=True)
class Ready:
    """A step's group of batches made ready: the group's target tokens (all ranks') and this
    rank's batches, collated."""

    n_tokens: int
    mine: list

    @classmethod
    def of(cls, group: Sequence, rank: int, world_size: int) -> Ready:
        return cls(group_tokens(group), list(group[rank::world_size]))


class Prefetcher:
    """Yields a ``Ready`` group for each of ``groups[start:]``, up to ``depth`` steps ahead
    (``pin``: its batches in page-locked memory, for a GPU). Use as a context manager:
    leaving it stops the thread."""

    def __init__(
        self,
        groups: Sequence,
        start: int,
        rank: int,
        world_size: int,
        depth: int = 2,
        pin: bool = False,
    ):
        self.groups, self.start, self.pin = groups, start, pin
        self.rank, self.world_size = rank, world_size
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.wait_s = 0.0
        self.thread = threading.Thread(target=self._work, name="aiayn-prefetch", daemon=True)

    def __enter__(self) -> Prefetcher:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        while self.thread.is_alive():
            try:  # unblock a put on a full queue
                self.queue.get_nowait()
            except queue.Empty:
                pass
            self.thread.join(timeout=0.05)

    def _put(self, item) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _work(self) -> None:
        try:
            for k in range(self.start, len(self.groups)):
                group = self.groups[k]
                ready = Ready.of(group, self.rank, self.world_size)
                if self.pin:  # for a GPU: its copies then need no wait
                    ready = Ready(ready.n_tokens, [pinned(b) for b in ready.mine])
                if not self._put(ready):
                    return
                if (k + 1) % RELEASE_EVERY == 0 and hasattr(group, "release"):
                    group.release()
        except BaseException as error:  # handed to the loop, which raises it
            self._put(error)

    def __iter__(self):
        for _ in range(self.start, len(self.groups)):
            began = time.perf_counter()
            item = self.queue.get()
            self.wait_s += time.perf_counter() - began
            if isinstance(item, BaseException):
                raise item
            yield item
