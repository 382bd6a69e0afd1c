"""The cores this process may use, which the thread counts of decoding are chosen from."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may use (its CPU affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS, Windows)
        return os.cpu_count() or 1
