"""Giving the C heap's free memory back to the system while a model trains.

A training step allocates thousands of tensors of a few to a few tens of MB. glibc serves
those below its mmap threshold (up to 32 MB) from its heap and keeps what is freed there;
their sizes vary from step to step, so the heap fragments and a process holds far more than
its live tensors need (bench/experiments/heap_memory.py measures what trimming gives). Making
every large tensor a mapping of its own (``MALLOC_MMAP_THRESHOLD_``) pays page faults on every
allocation. ``malloc_trim(0)`` instead hands back the free pages inside the heap; called
every few seconds from a thread it bounds what the heap keeps, and only pages used again
fault back in.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import warnings


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


class HeapTrimmer:
    """A daemon thread calling ``malloc_trim(0)`` every ``period`` seconds while in use
    (``with HeapTrimmer(1.0): ...``); ``period`` 0 does nothing. ``trims`` counts the calls."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.trims = 0
        self._trim = _malloc_trim() if period > 0 else None
        if period > 0 and self._trim is None:
            warnings.warn(
                "train.trim_heap_every: this C library has no malloc_trim (it is glibc's); "
                "the heap is left as it is",
                stacklevel=2,
            )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._trim(0)
            self.trims += 1

    def __enter__(self) -> HeapTrimmer:
        if self._trim is not None:
            self._thread = threading.Thread(target=self._run, name="aiayn-heap-trim", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
