"""Experiment: training-step speed at float32 and bf16 autocast with attention in bf16 or
float32 (bench/experiments/bf16_attention.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest, num, provenance, table

TITLE = "bfloat16 training: where attention runs"
INTRO = (
    "Training-step speed at float32 and at bf16 CPU autocast with attention in bf16 "
    "(autocast's own rule) or in float32 on the bf16 projections (what aiayn does)."
)


def render(results: Path) -> str:
    r = latest(results, "bf16_attention")
    if r is None:
        return ""
    rows = [
        [name, num(r["tokens_per_s"][name]), f"{r['speedup_over_float32'][name]:.2f}x"]
        for name in r["tokens_per_s"]
    ]
    return (
        provenance(r, "bench/experiments/bf16_attention.py")
        + f"\n\n`{r['preset']}` model, {r['batches']} Ding batches a timing, {r['threads']} "
        f"threads, median of {r['rounds']} rounds:\n\n"
        + table(["training step", "target tokens/s", "vs float32"], rows, {1, 2})
    )
