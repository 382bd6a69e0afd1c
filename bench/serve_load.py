"""Load on ``aiayn serve``: concurrent clients on 127.0.0.1, batched server vs unbatched.

Starts the server (``aiayn serve MODEL --threads T``) on the loopback address, once with
dynamic batching (the defaults) and once with ``--max-batch 1`` (every request decoded alone,
one at a time), and sends it N concurrent clients (1, 4, 16, 64), each posting a bounded
number of single-sentence ``/v1/translate`` requests (greedy) with real test sentences, one
after another. Reports throughput (sentences/s), p50/p95/p99 latency, errors and 503s, and
appends the results to bench/results/serve_load.jsonl. Every run is bounded in requests and
time, sends nothing off this machine, and stops its servers.

    python bench/serve_load.py models/ding-de-en
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_result  # noqa: E402
from scripts.browser_check import free_port, start_server  # noqa: E402

HOST = "127.0.0.1"  # the load never leaves this machine


def test_sentences(corpus: Path, n: int) -> list[str]:
    lines = gzip.decompress((corpus / "test.de.gz").read_bytes()).decode().splitlines()
    return [line for line in lines if line.strip()][:n]


def client(port, sentences, start, count, deadline, out, barrier):
    """Post ``count`` requests one after another on one keep-alive connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    barrier.wait()
    for i in range(count):
        if time.monotonic() > deadline:
            out.append(("not sent", 0.0))
            continue
        body = json.dumps({"text": sentences[(start + i) % len(sentences)]})
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            status = response.status
        except OSError as e:
            status = f"{type(e).__name__}"
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=120)
        out.append((status, time.perf_counter() - t0))
    conn.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load(port: int, sentences: list[str], clients: int, requests: int, seconds: float) -> dict:
    results: list[list] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client,
            args=(port, sentences, c * requests, requests, deadline, results[c], barrier),
        )
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    flat = [r for rs in results for r in rs]
    ok = [lat for status, lat in flat if status == 200]
    busy = sum(status == 503 for status, _ in flat)
    unsent = sum(status == "not sent" for status, _ in flat)
    errors = len(flat) - len(ok) - busy - unsent
    return {
        "clients": clients,
        "requests": clients * requests,
        "ok": len(ok),
        "errors": errors,
        "rejected_503": busy,
        "not_sent_time_limit": unsent,
        "lost": clients * requests - len(flat),
        "seconds": round(wall, 3),
        "sentences_per_s": round(len(ok) / wall, 2),
        "p50_s": round(percentile(ok, 0.50), 4),
        "p95_s": round(percentile(ok, 0.95), 4),
        "p99_s": round(percentile(ok, 0.99), 4),
        "mean_s": round(statistics.fmean(ok), 4) if ok else None,
    }


def run_mode(args, name: str, flags: list[str], clients: list[int], sentences) -> list[dict]:
    port = free_port()
    server = start_server(Path(args.model_dir), port, "--threads", str(args.threads), *flags)
    rows = []
    try:
        load(port, sentences, 2, 2, 60)  # warm-up
        for n in clients:
            row = {"server": name, **load(port, sentences, n, args.requests, args.max_seconds)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        server.terminate()
        server.wait(60)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--corpus", default="data/ding-de-en")
    parser.add_argument("--clients", default="1,4,16,64", help="comma-separated client counts")
    parser.add_argument("--unbatched-clients", default="1,16")
    parser.add_argument("--requests", type=int, default=8, help="requests per client")
    parser.add_argument("--max-seconds", type=float, default=180, help="per client count")
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    sentences = test_sentences(Path(args.corpus), 1000)
    batched = run_mode(args, "batched", [], clients, sentences)
    unbatched_clients = [int(c) for c in args.unbatched_clients.split(",") if c]
    alone = run_mode(args, "unbatched", ["--max-batch", "1"], unbatched_clients, sentences)
    summary = {}
    base = {r["clients"]: r for r in alone}
    for row in batched:
        if row["clients"] in base:
            ratio = row["sentences_per_s"] / max(base[row["clients"]]["sentences_per_s"], 1e-9)
            summary[f"speedup_at_{row['clients']}_clients"] = round(ratio, 2)
    print(json.dumps(summary))
    write_result(
        "serve_load",
        {
            "model_dir": args.model_dir,
            "requests_per_client": args.requests,
            "server_threads": args.threads,
            "request": "POST /v1/translate, one test sentence, greedy",
            "rows": batched + alone,
            **summary,
            "note": args.note,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
