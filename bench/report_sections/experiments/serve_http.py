"""Experiment: the server process's CPU a request over HTTP, decoding stubbed, the latest run
of bench/experiments/serve_http.py (one row per variant, 16 clients and one)."""

from __future__ import annotations

from pathlib import Path

from ..common import load, num, provenance, table

TITLE = "The server's HTTP side"
INTRO = (
    "The CPU a request of the whole `aiayn serve` process over HTTP on loopback (uvicorn "
    "started as the command starts it, decoding stubbed): uvicorn's protocol and event loop, "
    "the server's own path (the previous section) and the log; with the default flags, "
    "with `--access-log` (uvicorn's line on stderr for each request, written to a file), and "
    "on uvicorn's own protocol without the bounds on a request's head that `aiayn serve` "
    "adds (its size, and its deadline: a timer a request)."
)

VARIANTS = {
    "default": "default flags",
    "access-log": "`--access-log`",
    "unbounded-http": "uvicorn's protocol, unbounded",
}


def render(results: Path) -> str:
    records = load(results, "serve_http")
    if not records:
        return ""
    last = records[-1]
    cells = {(r["variant"], r["clients"]): r for r in last["rows"]}
    clients = sorted({c for _, c in cells}, reverse=True)
    rows = []
    for variant, label in VARIANTS.items():
        for c in clients:
            r = cells.get((variant, c))
            if r:
                rows.append([label, num(c), num(r["server_cpu_ms_per_request"], 3),
                             num(r["requests_per_s"], 0), num(r["p50_ms"], 2)])  # fmt: skip
    header = ["server", "clients", "ms CPU a request", "requests/s", "p50 ms"]
    return (
        provenance(last, "bench/experiments/serve_http.py")
        + f"\n\n{last['request']}; decoding {last['decoding']}; {num(last['requests'])} "
        f"requests a load of 16 clients (a quarter of that for one), the median of "
        f"{last['rounds']} rounds, a fresh server for each variant, in turn (each round "
        "starting with the next):\n\n" + table(header, rows, {1, 2, 3, 4})
    )
