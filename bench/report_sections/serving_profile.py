"""Where a loaded server's CPU goes: `serve_profile.py`'s py-spy samples by stage, every
record (each names what it measured in its note)."""

from __future__ import annotations

from pathlib import Path

from .common import load, num, provenance, table

TITLE = "Serving profile"
INTRO = (
    "`python bench/serve_profile.py`: py-spy samples of `aiayn serve`'s threads while 16 "
    "closed-loop clients post one sentence a request to `/translate`, each sample put in the "
    "first stage its stack names from the innermost frame out. CTranslate2 decodes on threads "
    "of its own that py-spy does not see: with that engine the shares are of the Python side "
    "only (the worker's wait on CTranslate2 shows as decode). Every record is listed, oldest "
    "first: the note says what changed, and a change that did not pay is kept with its "
    "figures."
)

STAGES = ("decode", "tokenize", "detokenize", "parse + validate", "access check",
          "JSON response", "HTTP protocol", "routing + middleware", "event loop",
          "batching queue", "metrics", "other")  # fmt: skip


def render(results: Path) -> str:
    records = load(results, "serve_profile")
    if not records:
        return ""
    rows = []
    for r in records:
        stages = r["stages"]
        top = sorted(stages.items(), key=lambda kv: -kv[1]["share"])[:4]
        rows.append(
            [
                r["time"].replace("T", " ")[:16],
                r["engine"],
                "greedy" if r.get("beam", 1) == 1 else f"beam {r['beam']}",
                str(r.get("server_threads")),
                num(r["load"]["sentences_per_s"], 1),
                f"{r['load']['p50_s'] * 1000:.0f} ms",
                num(r["load"]["server_cpu_ms_per_sentence"], 2),
                num(r["load"].get("mean_batch_texts") or 0, 1),
                ", ".join(f"{k} {v['share'] * 100:.0f}%" for k, v in top),
                str(r.get("load_average_1_min", "")),
                r.get("note", ""),
            ]
        )
    return (
        provenance(records[-1], "bench/serve_profile.py")
        + "\n\n"
        + table(
            [
                "time",
                "engine",
                "search",
                "--threads",
                "sentences/s",
                "p50",
                "server CPU ms/sentence",
                "mean batch",
                "largest stages (samples)",
                "load (1 min)",
                "note",
            ],
            rows,
            {3, 4, 5, 6, 7, 9},
        )  # fmt: skip
    )
