"""Experiment: the CPU time of one greedy step by batch size, aiayn against CTranslate2
(bench/experiments/step_cost.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, num, provenance, table

TITLE = "Cost of one decoding step"
INTRO = (
    "The CPU time of one greedy step against the number of sentences decoded together "
    "(one sentence repeated), for aiayn and CTranslate2 on the same weights; the d_model "
    "16 row runs the same architecture with almost no arithmetic, so its step is the cost "
    'of issuing the operators in eager mode. Where recorded, the "attention skipped" rows '
    "run the step with each attention product over the cache replaced by its queries: the "
    "step's time less theirs is what attention costs inside the step; the \"attention "
    'alone" row times the same calls back to back, their operands hot in the caches.'
)


def render(results: Path) -> str:
    parts = []
    records = load(results, "step_cost")
    for record in latest_by(records, lambda r: tuple(next(iter(r["cpu_ms_per_step"].values())))):
        columns = list(next(iter(record["cpu_ms_per_step"].values())))
        rows = [
            [name] + [num(costs.get(c), 2) for c in columns]
            for name, costs in record["cpu_ms_per_step"].items()
        ]
        spread = record.get("aiayn_over_ct2_rounds", {})
        ratios = [
            [f"aiayn / CTranslate2, {kind}"]
            + [
                f"{values[c]:.2f}x"
                + (
                    f" ({min(spread[kind][c]):.2f}-{max(spread[kind][c]):.2f})"
                    if len(spread.get(kind, {}).get(c, [])) > 1
                    else ""
                )
                for c in columns
            ]
            for kind, values in record.get("aiayn_over_ct2", {}).items()
        ]
        rounds = record.get("rounds", 1)
        median = f"median of {record.get('repeats', '?')}"
        if rounds > 1:
            median = (
                f"each decoder's median of {rounds} rounds run in turn (each the {median}); "
                "ratios: median of the rounds' ratios (lowest-highest)"
            )
        parts.append(
            f"`{record['model_dir']}`, greedy, CPU ms per step between the 10th and the 50th, "
            f"{median}:\n\n"
            + provenance(record, "bench/experiments/step_cost.py")
            + "\n\n"
            + table(
                ["CPU ms per step, sentences in the batch"] + columns,
                rows + ratios,
                set(range(1, len(columns) + 1)),
            )
        )
    return "\n\n".join(parts)
