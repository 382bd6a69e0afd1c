"""The server process's CPU a request over HTTP, decoding stubbed: ``aiayn serve``'s uvicorn
(started as the command starts it, ``aiayn.serve.server._serve``) with each text answered as
itself at once, so that what is timed is the HTTP side alone: uvicorn's protocol and event
loop, the server's own path (bench/experiments/serve_loop.py times that part in process) and
the log.

    python bench/experiments/serve_http.py [MODEL_DIR] [--requests 4000] [--rounds 3]

Variants, a fresh server each, in turn, each round starting with the next:

- ``default``: the default flags (no line per request);
- ``access-log``: ``--access-log``, uvicorn's line on stderr for each request (written to a
  file on disk, as the bench's servers write their logs);
- ``unbounded-http``: default flags on uvicorn's own httptools protocol, without the bounds
  ``aiayn.serve.protocol`` adds (a request head's size, and its deadline: a timer a request).

The clients are bench/serve_load.py's (closed-loop, keep-alive, LibreTranslate's JSON
``/translate``, one test sentence a request), 16 at once and one; the figures are the
server process's CPU a request (``/proc``) and the requests a second, the median of the
rounds. Appends a record to bench/results/serve_http.jsonl.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from scripts.browser_check import free_port  # noqa: E402

from common import write_result  # noqa: E402
from serve_load import HOST, load, start_process, test_sentences  # noqa: E402

VARIANTS = {
    "default": [],
    "access-log": ["--access-log"],
    "unbounded-http": ["--unbounded-http"],
}
CLIENTS = (16, 1)


def serve_stubbed(model_dir: str, port: int, access_log: bool, unbounded: bool) -> None:
    """The child: ``aiayn serve MODEL_DIR`` on ``port`` (with ``--access-log`` if
    ``access_log``; on uvicorn's own protocol if ``unbounded``), its translators answering
    each text as itself at once."""
    from serve_loop import stub_translate  # this folder's: the same stub as the loop's

    import aiayn.serve.server
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ServedModel
    from aiayn.serve.server import _serve, listen_socket, model_specs

    ServedModel.translate = staticmethod(stub_translate)
    if unbounded:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        aiayn.serve.server.protocol_class = lambda: HttpToolsProtocol
    config = ServeConfig(access_log=access_log)
    sock = listen_socket(HOST, port)
    try:
        _serve(sock, create_app(model_specs([model_dir]), config), config, HOST, port)
    finally:
        sock.close()


def measure(model_dir: str, sentences: list[str], requests: int, rounds: int) -> dict:
    figures: dict[tuple[str, int], list[dict]] = {}
    order = list(VARIANTS.items())
    for round_ in range(rounds):
        for variant, flags in order[round_ % len(order) :] + order[: round_ % len(order)]:
            port = free_port()
            command = [sys.executable, __file__, model_dir, "--child", str(port), *flags]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
            server = start_process(command, port, env, "/health")
            try:
                load(port, sentences, 16, max(2, requests // 160), 60, route="/translate")
                for clients in CLIENTS:
                    load_size = requests if clients > 1 else requests // 4
                    each = max(2, load_size // clients)
                    row = load(port, sentences, clients, each, 120, server.pid, route="/translate")
                    if row["ok"] != row["requests"]:
                        raise SystemExit(f"{variant}: {row['requests'] - row['ok']} not answered")
                    figures.setdefault((variant, clients), []).append(row)
            finally:
                server.terminate()
                server.wait(60)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default=str(ROOT / "models" / "ding-de-en"))
    parser.add_argument("--corpus", default=str(ROOT / "data" / "ding-de-en"))
    parser.add_argument("--requests", type=int, default=4000, help="per load of 16 clients")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # the server, on this port
    parser.add_argument("--access-log", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unbounded-http", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        serve_stubbed(args.model_dir, args.child, args.access_log, args.unbounded_http)
        return
    sentences = test_sentences(Path(args.corpus), 1000)
    figures = measure(args.model_dir, sentences, args.requests, args.rounds)
    rows = []
    for (variant, clients), loads in figures.items():
        cpu = [r["server_cpu_ms_per_sentence"] for r in loads]
        rate = [r["sentences_per_s"] for r in loads]
        rows.append(
            {
                "variant": variant,
                "clients": clients,
                "server_cpu_ms_per_request": round(statistics.median(cpu), 4),
                "requests_per_s": round(statistics.median(rate), 1),
                "p50_ms": round(1000 * statistics.median(r["p50_s"] for r in loads), 3),
                "rounds_cpu_ms": cpu,
                "rounds_requests_per_s": rate,
            }
        )
        print(f"{variant:10s} {clients:3d} clients: {rows[-1]['server_cpu_ms_per_request']:.3f} "
              f"ms CPU a request, {rows[-1]['requests_per_s']:.0f} requests/s, p50 "
              f"{rows[-1]['p50_ms']:.2f} ms {cpu}")  # fmt: skip
    path = write_result(
        "serve_http",
        {
            "model_dir": args.model_dir,
            "requests": args.requests,
            "rounds": args.rounds,
            "request": "POST /translate (LibreTranslate's API), JSON, one sentence, de -> en",
            "decoding": "stubbed: each text answered as itself at once",
            "rows": rows,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
