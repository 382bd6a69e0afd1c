"""Shared helpers for the benchmarks: machine description, timing, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).parent / "results"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def median_time(fn, repeats: int = 5, warmup: int = 1, clock=time.perf_counter) -> float:
    """Median seconds of ``fn()`` by ``clock`` (wall clock; ``time.process_time``: CPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def write_result(name: str, record: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.jsonl"
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), **record}
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    return path
