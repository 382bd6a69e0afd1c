"""Experiment: one greedy step's attention over the KV cache by formulation, hot and cold
(bench/experiments/attention_kernels.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, num, provenance, table

TITLE = "Attention over the KV cache"
INTRO = (
    "One greedy step's attention (one query per sentence) over its cached keys and values: "
    "`scaled_dot_product_attention` as aiayn runs it, the same products by `torch.bmm` on "
    "head-major keys and values, and by element-wise products, against one plain read "
    "of the same keys and values; hot (back to back) and cold (after reading 256 MB)."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(
        load(results, "attention_kernels"), lambda r: (r["machine"].get("cpu_model"), r["model"])
    ):
        rows = [
            [f"{r['rows']} x {r['length']}", r["kernel"], num(r["hot_us"], 0), num(r["cold_us"], 0),
             num(r["cold_gb_s"], 1)]
            for r in record["rows"]
        ]  # fmt: skip
        parts.append(
            f"`{record['model']}`'s heads ({record['heads']} of {record['d_head']}), "
            f"{record['threads']} thread(s), median of {record['repeats']}:\n\n"
            + provenance(record, "bench/experiments/attention_kernels.py")
            + "\n\n"
            + table(
                [
                    "sentences x cached positions",
                    "formulation",
                    "hot us",
                    "cold us",
                    "cold GB/s of keys and values",
                ],
                rows,
                {2, 3, 4},
            )  # fmt: skip
        )
    return "\n\n".join(parts)
