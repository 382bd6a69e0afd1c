"""The event loop's CPU a request of ``aiayn serve``'s own path: the app called in process as
uvicorn calls it (no HTTP, no sockets), its model's decoding replaced by a stub that answers
each text at once, so that what is timed is the server's part alone: the middleware, routing,
the access check, parsing and validation, the token-count check, the batching queue's hand-off
and the JSON answer.

    python bench/experiments/serve_loop.py [MODEL_DIR] [--requests 3000] [--rounds 3]

Variants, timed in turn in one process, each round starting with the next:

- ``lane``: LibreTranslate's ``POST /translate`` with a JSON body, as the server answers it
  (``TranslateLane``, before FastAPI's routing);
- ``fastapi``: the same requests with the lane taken out of the app, so that FastAPI routes
  them and resolves the route's dependencies (the body still parsed once, by ``JsonBody``);
- ``form``: the same texts form-encoded (always FastAPI's route).

One client (a request at a time) and 16 at once; the figure is the main thread's CPU
(``time.thread_time``) a request, the median of the rounds. Appends a record to
bench/results/serve_loop.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from aiayn.api.results import Hypothesis, Translation  # noqa: E402
from aiayn.serve.app import create_app  # noqa: E402
from aiayn.serve.config import ServeConfig  # noqa: E402
from aiayn.serve.errors import replaying  # noqa: E402
from aiayn.serve.routes.libretranslate import TranslateLane  # noqa: E402
from aiayn.serve.server import model_specs  # noqa: E402
from common import write_result  # noqa: E402
from serve_load import test_sentences  # noqa: E402

VARIANTS = ("lane", "fastapi", "form")
CLIENTS = (1, 16)


def stub_translate(texts: list[str], **options) -> list[Translation]:
    """Each text back as its own translation, at once."""
    return [Translation((Hypothesis(text, (), 0.0, 0.0),)) for text in texts]


def request(text: str, form: bool) -> tuple[list, bytes]:
    """The headers and body of a ``/translate`` request of ``text``, de -> en."""
    fields = {"q": text, "source": "de", "target": "en"}
    if form:
        body, kind = urlencode(fields).encode(), b"application/x-www-form-urlencoded"
    else:
        body, kind = json.dumps(fields).encode(), b"application/json"
    headers = [(b"host", b"127.0.0.1"), (b"content-type", kind),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    return headers, body


async def no_disconnect() -> dict:
    """An ASGI ``receive`` after the body: the client stays (the answer ends the call)."""
    await asyncio.Event().wait()
    return {}


async def call(app, text: str, form: bool) -> None:
    headers, body = request(text, form)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/translate", "raw_path": b"/translate", "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    status = []

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, replaying(body, no_disconnect), send)
    if status != [200]:
        raise SystemExit(f"/translate answered {status} to {text!r}")


async def load(app, sentences: list[str], clients: int, requests: int, form: bool) -> float:
    """The main thread's CPU milliseconds a request, ``clients`` sending at once."""
    each = max(1, requests // clients)

    async def client(k: int) -> None:
        for i in range(each):
            await call(app, sentences[(k * each + i) % len(sentences)], form)

    cpu = time.thread_time()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return 1000 * (time.thread_time() - cpu) / (each * clients)


def without_lane(app) -> None:
    """``app`` with ``TranslateLane`` taken out: FastAPI routes every request."""
    app.user_middleware = [m for m in app.user_middleware if m.cls is not TranslateLane]
    app.middleware_stack = None  # built again on the next call


async def measure(model_dir: Path, sentences: list[str], requests: int, rounds: int) -> dict:
    apps = {}
    for variant in VARIANTS:
        app = create_app(model_specs([str(model_dir)]), ServeConfig(), background=False)
        if variant == "fastapi":
            without_lane(app)
        apps[variant] = app
    figures: dict[tuple[str, int], list[float]] = {}
    async with contextlib.AsyncExitStack() as running:
        for app in apps.values():
            await running.enter_async_context(app.router.lifespan_context(app))  # models load
            for model in app.state.registry.models.values():
                model.translate = stub_translate
        order = list(apps.items())
        for round_ in range(rounds):
            for variant, app in order[round_ % len(order) :] + order[: round_ % len(order)]:
                for clients in CLIENTS:
                    form = variant == "form"
                    await load(app, sentences, clients, requests // 10, form)  # warm-up
                    ms = await load(app, sentences, clients, requests, form)
                    figures.setdefault((variant, clients), []).append(ms)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default=str(ROOT / "models" / "ding-de-en"))
    parser.add_argument("--corpus", default=str(ROOT / "data" / "ding-de-en"))
    parser.add_argument("--requests", type=int, default=3000, help="per load")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sentences = test_sentences(Path(args.corpus), 1000)
    figures = asyncio.run(measure(Path(args.model_dir), sentences, args.requests, args.rounds))
    rows = [
        {
            "variant": variant,
            "clients": clients,
            "loop_cpu_ms_per_request": round(statistics.median(values), 4),
            "rounds_ms": [round(v, 4) for v in values],
        }
        for (variant, clients), values in figures.items()
    ]
    for row in rows:
        print(f"{row['variant']:8s} {row['clients']:3d} clients: "
              f"{row['loop_cpu_ms_per_request']:.3f} ms CPU a request {row['rounds_ms']}")  # fmt: skip
    path = write_result(
        "serve_loop",
        {
            "model_dir": args.model_dir,
            "requests": args.requests,
            "rounds": args.rounds,
            "request": "POST /translate (LibreTranslate's API), one sentence, de -> en",
            "decoding": "stubbed: each text answered as itself at once",
            "rows": rows,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
