"""Serving load: `aiayn serve` batched and unbatched under N concurrent clients
(bench/serve_load.py), the latest record per model."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, provenance, table

TITLE = "Serving load"
INTRO = (
    "`aiayn serve` on 127.0.0.1 with dynamic batching (the defaults) and with "
    "`--max-batch 1` (unbatched), N concurrent clients each posting single test "
    "sentences one after another."
)


def heading(record: dict) -> str:
    """The line that names a serve_load.py record's model, requests and threads, and its
    provenance (the serving sections' tables both stand under it)."""
    if record.get("seconds_per_load"):  # wrk: a load lasts a time
        size = f"{num(record['seconds_per_load'], 0)} s a load (wrk)"
    else:
        size = f"{record['requests_per_client']} requests per client"
    return (
        f"`{record['model_dir']}`, {record['request']}, {size}, "
        f"{record['server_threads']} server thread(s):\n\n"
        + provenance(record, "bench/serve_load.py")
        + "\n\n"
    )


def render(results: Path) -> str:
    parts = []
    records = [r for r in load(results, "serve_load") if r.get("compare") is None]
    for record in latest_by(records, lambda r: r["model_dir"]):
        rows = [
            [
                row["server"],
                str(row["clients"]),
                num(row["sentences_per_s"], 1),
                f"{row['p50_s']:.2f} s",
                f"{row['p95_s']:.2f} s",
                f"{row['p99_s']:.2f} s",
                str(row["errors"]),
                str(row.get("rejected_503", 0)),
            ]
            for row in record["rows"]
        ]
        speedups = [
            f"{key.split('_')[2]} clients: {value:.2f}x"
            for key, value in record.items()
            if key.startswith("speedup_at_")
        ]
        parts.append(
            heading(record)
            + table(
                ["server", "clients", "sentences/s", "p50", "p95", "p99", "errors", "503"],
                rows,
                {1, 2, 3, 4, 5, 6, 7},
            )
            + (
                "\n\nBatched against unbatched throughput: " + "; ".join(speedups) + "."
                if speedups
                else ""
            )
        )
    return "\n\n".join(parts)
