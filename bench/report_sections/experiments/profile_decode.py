"""Experiment: where decoding time goes, CPU ms per 1,000 generated tokens by operator
(bench/experiments/profile_decode.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, num, pct, provenance, table

TITLE = "Where decoding time goes"
INTRO = (
    "torch.profiler over a whole greedy run for aiayn, CPU time for CTranslate2 on the "
    "same batches; matrix products inside decoding against the same shapes timed alone."
)


def render(results: Path) -> str:
    parts = []
    records = [r for r in load(results, "profile_decode") if "cpu_ms_per_1000_tokens" in r]
    for record in latest_by(records, lambda r: (r["model_dir"], r["beam"], r.get("int8", False))):
        rows = [[name, num(value)] for name, value in record["cpu_ms_per_1000_tokens"].items()]
        share = record.get("int8_gemm_share") if record.get("int8") else record.get("gemm_share")
        rows.append(["share of aiayn's operator time in matrix products", pct(share)])
        gflops = record.get("gemm_gflops") or {}
        for where, value in gflops.items():
            rows.append([f"matrix products, GFLOP/s {where}", num(value, 1)])
        top = ", ".join(f"{op} {pct(v)}" for op, v in list(record["top_ops"].items())[:5])
        kind = "int8" if record.get("int8") else "float32"
        search = "greedy" if record["beam"] == 1 else f"beam {record['beam']}"
        parts.append(
            f"`{record['model_dir']}`, {search}, {kind}, {record['sentences']} sentences in "
            f"batches of {record['batch']}, {record['threads']} thread(s):\n\n"
            + provenance(record, "bench/experiments/profile_decode.py")
            + "\n\n"
            + table(["CPU ms per 1,000 generated tokens", "value"], rows, {1})
            + f"\n\nThe costliest operators (share of aiayn's operator time): {top}."
        )
    return "\n\n".join(parts)
