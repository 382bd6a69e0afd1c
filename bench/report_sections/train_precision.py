"""Training precision (bench/train_precision.py): the main job's training at float32 and
bf16, per series of runs, with the test split's scores."""

from __future__ import annotations

from pathlib import Path

from .common import load, num, provenance, table

TITLE = "Training precision"
INTRO = (
    "`bench/train_precision.py`: the main job's training for its minutes at float32 and at "
    "bf16 autocast, alternated, each run then translating the test split greedily "
    "(sacreBLEU)."
)


def render(results: Path) -> str:
    records = load(results, "train_precision")
    parts = []
    for series in dict.fromkeys(r["series"] for r in records):
        runs = [r for r in records if r["series"] == series]
        rows = [
            [r["row"]["precision"], str(r["row"]["run"]), num(r["row"]["steps"]),
             num(r["row"]["tokens_per_s"]), num(r["row"]["valid_loss"], 3),
             num(r["row"]["bleu"], 2), num(r["row"]["chrf"], 2)]
            for r in runs
        ]  # fmt: skip
        by = {}
        for r in runs:
            by.setdefault(r["row"]["precision"], []).append(r["row"])
        means = [
            f"{p}: {num(sum(x['steps'] for x in xs) / len(xs))} steps, chrF "
            f"{num(sum(x['chrf'] for x in xs) / len(xs), 2)} (mean of {len(xs)})"
            for p, xs in by.items()
        ]
        parts.append(
            f"`{runs[0]['config']}`{' with ' + ', '.join(runs[0]['sets']) if runs[0]['sets'] else ''}"
            f", test split greedy:\n\n"
            + provenance(runs[-1], "bench/train_precision.py")
            + "\n\n"
            + table(
                ["precision", "run", "steps", "tokens/s", "valid loss", "BLEU", "chrF"],
                rows,
                {1, 2, 3, 4, 5, 6},
            )
            + "\n\n"
            + "; ".join(means)
            + "."
        )
    return "\n\n".join(parts)
