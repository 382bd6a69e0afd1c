"""Experiment: a training process's peak RSS and step time under glibc's heap policies, the
latest run of bench/experiments/heap_memory.py (one row per variant)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..common import load, num, provenance, table

TITLE = "Heap memory in training"
INTRO = (
    "A training process's peak resident memory and step time under glibc's heap policies: "
    "its default, `train.trim_heap_every` (`malloc_trim` from a thread, "
    "`aiayn.train.heap`) and a 4 MB mmap threshold (every larger tensor a mapping of its "
    "own)."
)


def render(results: Path) -> str:
    records = load(results, "heap_memory")
    if not records:
        return ""
    last = records[-1]
    batch = [r for r in records if (r.get("command"), r.get("time", "")[:13]) == (
        last.get("command"), last.get("time", "")[:13])]  # fmt: skip
    base = next((r for r in batch if not r["env"] and not r["overrides"]), None)
    base_s = statistics.mean(x["step_s"] for x in base["runs"]) if base else None
    rows = []
    for r in batch:
        rss = [x["peak_rss_mb"] for x in r["runs"]]
        step = [x["step_s"] for x in r["runs"]]
        setting = ", ".join(
            [f"`{k}={v}`" for k, v in r["env"].items()] + [f"`{o}`" for o in r["overrides"]]
        )
        rows.append(
            [
                r["variant"],
                setting or "(none)",
                " / ".join(num(x) for x in rss),
                " / ".join(num(x, 2) for x in step),
                f"{statistics.mean(step) / base_s:.2f}x" if base_s else "n/a",
            ]
        )
    precision = next((x.get("precision") for x in last["runs"] if x.get("precision")), "?")
    return (
        # training: the float32 engine of inference does not apply
        provenance(
            {k: v for k, v in last.items() if k != "fp32_engine"},
            "bench/experiments/heap_memory.py",
        )
        + f"\n\nThe base model on the {num(last['pairs'])}-pair store, batches of 4,000 tokens, "
        f"activation checkpointing on, {precision}, {last['steps']} steps per run; each figure "
        "one run, the variants in turn:\n\n"
        + table(
            ["heap policy", "setting", "peak RSS MB", "s per step", "step time vs default"],
            rows,
            {2, 3, 4},
        )
    )
