"""Experiment: fbgemm against oneDNN for dynamic int8 products, by shape and rows
(bench/experiments/int8_kernels.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import ratios_by_shape

TITLE = "int8 products: fbgemm and oneDNN"
INTRO = (
    "Which of PyTorch's two dynamic int8 products is faster by shape and rows; "
    "`aiayn.model.quantize` uses oneDNN for large outputs where the CPU has AMX."
)


def render(results: Path) -> str:
    return ratios_by_shape(
        results,
        "int8_kernels",
        "fbgemm_over_onednn",
        lambda record: (
            "fbgemm's time over oneDNN's for one dynamic int8 product, by weight shape "
            "(out x in) and rows (above 1: oneDNN faster; AMX int8 on this CPU: "
            f"{record['amx_int8']}; aiayn takes oneDNN from {record['onednn_from']} output "
            "entries), CPU time:"
        ),
        "bench/experiments/int8_kernels.py",
    )
