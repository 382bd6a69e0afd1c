"""Experiment: float32 products by MKL against prepacked oneDNN, by shape and rows
(bench/experiments/fp32_kernels.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, num, provenance, table

TITLE = "Float32 products: MKL and oneDNN"
INTRO = (
    "Which float32 product is faster by shape and rows: PyTorch's default (MKL, the "
    "weight column-major as a model directory loads it) or oneDNN with the weight "
    "prepacked (`aiayn.model.layout.PackedLinear`, the default on AMD CPUs with AVX-512)."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "fp32_kernels"), lambda r: r["machine"].get("cpu")):
        rows = [
            [f"{r['shape']} ({r['k']} x {r['n']})", str(r["rows"]), num(r["mkl_gflops"], 1),
             num(r["onednn_gflops"], 1), f"{r['onednn_speedup']:.2f}x"]
            for r in record["rows"]
        ]  # fmt: skip
        parts.append(
            f"`{record['model']}`'s shapes, {record['threads']} thread(s), median of "
            f"{record['repeats']}:\n\n"
            + provenance(record, "bench/experiments/fp32_kernels.py")
            + "\n\n"
            + table(
                ["product", "rows", "MKL GFLOP/s", "oneDNN GFLOP/s", "oneDNN / MKL"],
                rows,
                {1, 2, 3, 4},
            )  # fmt: skip
        )
    return "\n\n".join(parts)
