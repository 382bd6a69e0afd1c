"""Experiment: eager mode's floor in throughput-mode greedy decoding
(bench/experiments/eager_floor.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, num, provenance, table

TITLE = "Eager mode's floor in throughput mode"
INTRO = (
    "How much of throughput-mode greedy decoding (`bench/decode_speed.py`'s) is the "
    "framework's floor: the step of the same architecture at d_model 16, summed over the "
    "real run's steps at their row counts. Removing it all would make the run at most "
    "the last column faster; any step still made of PyTorch operators keeps part of it."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(
        load(results, "eager_floor"), lambda r: (r["machine"].get("cpu_model"), r["model_dir"])
    ):
        rows = [
            [name, num(r["run_cpu_ms"], 0), str(r["steps"]), num(r["mean_rows_per_step"], 1),
             num(r["floor_ms"], 0), f"{100 * r['floor_share']:.1f}%",
             f"{r['most_without_the_floor']:.2f}x"]
            for name, r in record["runs"].items()
        ]  # fmt: skip
        floor = ", ".join(f"{n}: {ms:.2f}" for n, ms in record["floor_cpu_ms_per_step"].items())
        parts.append(
            f"`{record['model_dir']}`, median of {record['repeats']} runs; the d_model 16 "
            f"step, CPU ms at each row count: {floor}.\n\n"
            + provenance(record, "bench/experiments/eager_floor.py")
            + "\n\n"
            + table(
                [
                    "decoder",
                    "run CPU ms",
                    "steps",
                    "rows per step",
                    "floor ms",
                    "floor share",
                    "at most, without the floor",
                ],
                rows,
                {1, 2, 3, 4, 5, 6},
            )  # fmt: skip
        )
    return "\n\n".join(parts)
