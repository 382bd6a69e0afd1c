"""Experiment: how many int8 translations change when a sentence is decoded alone rather than
in a batch (bench/experiments/int8_batch.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, provenance, table

TITLE = "int8 batch dependence"
INTRO = (
    "fbgemm's dynamic int8 product quantizes its whole input with one scale, so an int8 "
    "row's rounding depends on the other rows of its batch."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "int8_batch"), lambda r: r["model_dir"]):
        n = record["sentences"]
        rows = [[name, f"{count} of {n}"] for name, count in record["differ"].items()]
        parts.append(
            f"`{record['model_dir']}`, greedy, the first {n} test sentences as one batch and one "
            "by one:\n\n"
            + provenance(record, "bench/experiments/int8_batch.py")
            + "\n\n"
            + table(["decoder", "sentences that differ alone"], rows, {1})
        )
    return "\n\n".join(parts)
