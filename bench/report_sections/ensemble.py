"""Ensembles (bench/ensemble.py): an ensemble against its members alone, in BLEU, chrF and
time."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, provenance, table

TITLE = "Ensembles"
INTRO = (
    "`bench/ensemble.py`: translators trained alike but for their seed, each alone and "
    "as an ensemble (`aiayn.load([A, B])`, per-step probabilities averaged), scored by "
    "sacreBLEU (BLEU, chrF)."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "ensemble"), lambda r: tuple(r["models"])):
        rows = [
            [r["model"], str(r["beam"]), num(r["bleu"], 2), num(r["chrf"], 2), num(r["seconds"], 1)]
            for r in record["rows"]
        ]
        parts.append(
            f"{', '.join(f'`{m}`' for m in record['models'])} on `{record['corpus']}`'s test "
            f"split ({record['sentences']} sentences):\n\n"
            + provenance(record, "bench/ensemble.py")
            + "\n\n"
            + table(["model", "beam", "BLEU", "chrF", "seconds"], rows, {1, 2, 3, 4})
        )
    return "\n\n".join(parts)
