"""Experiment: the event loop's CPU a request of the server's own path, the latest run of
bench/experiments/serve_loop.py (one row per body and answering path, 1 and 16 clients)."""

from __future__ import annotations

from pathlib import Path

from ..common import load, num, provenance, table

TITLE = "The server's own path"
INTRO = (
    "The event loop's CPU a request of `aiayn serve` itself (the app called in process as "
    "uvicorn calls it, decoding stubbed): LibreTranslate's JSON `/translate` answered by "
    "`TranslateLane` before FastAPI's routing, the same requests routed by FastAPI (the "
    "server without the lane; the body parsed once either way), and form bodies (FastAPI's "
    "route)."
)

VARIANTS = {
    "lane": "JSON, `TranslateLane`",
    "fastapi": "JSON, FastAPI's routing (without the lane)",
    "form": "form, FastAPI's routing",
}


def render(results: Path) -> str:
    records = load(results, "serve_loop")
    if not records:
        return ""
    last = records[-1]
    cells = {(r["variant"], r["clients"]): r for r in last["rows"]}
    clients = sorted({c for _, c in cells})
    rows = []
    for variant, label in VARIANTS.items():
        if not any((variant, c) in cells for c in clients):
            continue
        row = [label]
        for c in clients:
            r = cells.get((variant, c))
            row.append(num(r["loop_cpu_ms_per_request"], 3) if r else "n/a")
        rows.append(row)
    header = ["path", *(f"ms CPU a request, {c} client{'s' * (c > 1)}" for c in clients)]
    return (
        provenance(last, "bench/experiments/serve_loop.py")
        + f"\n\n{last['request']}; decoding {last['decoding']}; {num(last['requests'])} "
        f"requests a load, the median of {last['rounds']} rounds, the paths in turn (each round "
        "starting with the next):\n\n" + table(header, rows, set(range(1, len(header))))
    )
