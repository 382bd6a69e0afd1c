"""Shared helpers for the benchmarks: machine description, timing, result files."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]
# the vector units that change a CPU's speed and its float summation order
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")


def cpu_caches() -> str | None:
    """The first CPU's data and unified caches, e.g. "L1 32K, L2 1024K, L3 32768K" (sysfs)."""
    sizes = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level, size = (index / "level").read_text().strip(), (index / "size").read_text()
        except OSError:
            continue
        sizes.append(f"L{level} {size.strip()}")
    return ", ".join(sizes) or None


def machine() -> dict:
    """The CPU (its name, family/model/stepping as /proc/cpuinfo numbers them, the vector
    units of ``CPU_FLAGS`` it has, its caches), core counts and library versions. Machines
    of one kind may differ in generation under one name ("AMD EPYC"): the family and model
    tell them apart."""
    cpu, flags, ids = None, None, {}  # from the first processor listed
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and cpu is None:
                cpu = value.strip()
            elif key == "flags" and flags is None:
                flags = [flag for flag in CPU_FLAGS if flag in value.split()]
            elif key in ("cpu family", "model", "stepping") and key not in ids:
                ids[key] = value.strip()
    except OSError:
        pass
    generation = None
    if len(ids) == 3:
        generation = f"family {ids['cpu family']} model {ids['model']} stepping {ids['stepping']}"
    return {
        "cpu": cpu or platform.processor() or platform.machine(),
        "cpu_model": generation,
        "cpu_caches": cpu_caches(),
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        # the cores this process may run on (taskset, a container's cpuset): fewer than
        # "cores" when a run is pinned to part of a larger host
        "cores_usable": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


_ALLOCATOR: dict | None = None  # what steady_allocator set, for the records


def steady_allocator() -> dict | None:
    """Have glibc keep freed memory in the process instead of handing large blocks back to
    the system (M_MMAP_THRESHOLD 32 MiB, its maximum; M_TRIM_THRESHOLD 1 GiB), so that no
    decoder pays page faults for memory another one freed, whatever ran before it.

    Peers timed in turn in one process otherwise depend on each other's allocations:
    CTranslate2's throughput-mode int8 decoding ran 10.5k tokens per CPU second in a fresh
    process and 12.3k with these settings (its step allocates and frees its KV cache), and
    earlier aiayn runs raise glibc's adaptive mmap threshold for it. Call it before timing;
    write_result records the settings. None where the C library is not glibc.
    """
    global _ALLOCATOR
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    settings = {"M_MMAP_THRESHOLD": 32 << 20, "M_TRIM_THRESHOLD": 1 << 30}
    codes = {"M_TRIM_THRESHOLD": -1, "M_MMAP_THRESHOLD": -3}
    if not all(mallopt(codes[name], value) for name, value in settings.items()):
        return None
    _ALLOCATOR = {"glibc": settings}
    return _ALLOCATOR


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


def commit() -> str | None:
    """The checked-out commit, with "+changes" when the working tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")


def command() -> str:
    """The command line that ran this benchmark, as a user would type it from the root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return shlex.join(["python", str(script), *sys.argv[1:]])


def fp32_engine() -> str:
    """Where aiayn's float32 inference products run in this process: "onednn" or "mkl"
    (``aiayn.model.layout.onednn_fp32``: the CPU, or $AIAYN_FP32_ENGINE)."""
    from aiayn.model.layout import onednn_fp32

    return "onednn" if onednn_fp32() else "mkl"


def write_result(name: str, record: dict) -> Path:
    """Append ``record`` to bench/results/NAME.jsonl with the time, machine, command and commit
    (what docs/performance.md names beside each table; bench/report.py writes that page)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.jsonl"
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine(),
        "command": command(),
        "commit": commit(),
        **({"allocator": _ALLOCATOR} if _ALLOCATOR else {}),
        "fp32_engine": fp32_engine(),
        **record,
    }
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    return path
