"""Experiment: one feed-forward block eager against `torch.compile`
(bench/experiments/compile_block.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, provenance, table

TITLE = "torch.compile of a feed-forward block"
INTRO = "Whether `torch.compile` pays for a decoder step on the CPU."


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "compile_block"), lambda r: r["rows"]):
        rows = [
            ["eager", f"{record['eager_us']:.0f} us"],
            ["torch.compile (max-autotune, frozen weights)", f"{record['compiled_us']:.0f} us"],
            ["speed-up", f"{record['speedup']:.2f}x"],
            ["compile time", f"{record['compile_s']:.0f} s"],
            ["largest difference, scaled", f"{record['max_scaled_diff']:.1e}"],
        ]
        parts.append(
            f"One feed-forward block of the shipped model, {record['rows']} rows, CPU time:\n\n"
            + provenance(record, "bench/experiments/compile_block.py")
            + "\n\n"
            + table(["", "value"], rows, {1})
        )
    return "\n\n".join(parts)
