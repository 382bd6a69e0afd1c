"""Experiment: column-major against row-major linear weights, by shape and rows
(bench/experiments/linear_layout.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import ratios_by_shape

TITLE = "Linear weight layout"
INTRO = (
    "Whether a column-major weight (`aiayn.model.layout`, as a model directory loads on a "
    "CPU) multiplies faster than `nn.Linear`'s row-major one."
)


def render(results: Path) -> str:
    return ratios_by_shape(
        results,
        "linear_layout",
        "column_major_speedup",
        lambda record: (
            "Column-major weight against row-major, speed-up of `F.linear` by weight "
            "shape (out x in) and rows multiplied, CPU time:"
        ),
        "bench/experiments/linear_layout.py",
    )
