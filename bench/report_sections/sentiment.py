"""Sentiment accuracy (bench/sentiment.py): aiayn's classifiers against TF-IDF + logistic
regression and the majority class."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, pct, provenance, table

TITLE = "Sentiment accuracy"
INTRO = (
    "aiayn's classifiers against TF-IDF (1-2 grams) + logistic regression and the "
    "majority class on the Rotten Tomatoes split."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "sentiment"), lambda r: r.get("split", "test")):
        split = record.get("split", "test")
        examples = record.get("examples", record.get("test_examples"))
        rows = [[name, pct(value)] for name, value in record["accuracy"].items()]
        parts.append(
            f"{split} split, {examples} snippets:\n\n"
            + provenance(record, "bench/sentiment.py")
            + "\n\n"
            + table(["classifier", "accuracy"], rows, {1})
        )
    return "\n\n".join(parts)
