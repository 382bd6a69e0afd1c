"""Where a loaded ``aiayn serve`` spends its CPU: py-spy samples of the server under load.

Starts ``aiayn serve MODEL`` (with each ``--engine`` given), sends it the load of
bench/serve_load.py (16 closed-loop clients, one test sentence a request, LibreTranslate's
``/translate`` route by default), and samples the server's threads with py-spy (``pip install
py-spy``) while the load runs. Each sample is put in the first stage its stack names, from the
innermost frame out (``STAGES``: decoding, tokenizing, detokenizing, parsing and validating,
the access check, JSON, the HTTP protocol, the event loop, the batching queue, metrics); the
shares, times the server's CPU per sentence, give each stage's CPU per sentence. Appends one
record per engine to bench/results/serve_profile.jsonl.

    python bench/serve_profile.py models/ding-de-en --engines torch,ctranslate2

``--pure-python-http`` hides uvloop and httptools from the server where they are installed
(uvicorn then runs h11 on asyncio's own loop, as where they are not).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_result  # noqa: E402
from bench.serve_load import load, start_aiayn, test_sentences  # noqa: E402
from scripts.browser_check import free_port  # noqa: E402

# (stage, substrings of "function (file" a frame must hold), tried from the innermost frame out
STAGES = (
    ("decode", ("translate_batch", "ctranslate2/searches.py", "infer/beam.py", "model/",
                "torch/nn/", "infer/translate.py (search", "_greedy", "_beam")),
    ("detokenize", ("decode_pieces", "DecodePieces", "DecodeIds", "tokenizer.py (decode",
                    "tokenizer.py (detokenize")),
    ("tokenize", ("EncodeAsPieces", "encode_source", "tokenizer.py (encode", "tokenizer.py (pieces",
                  "token_counts", "source_ids", "tokenizer.py (piece")),
    ("access check", ("serve/access.py", "serve/keys.py", "limits/")),
    ("parse + validate", ("libretranslate_body", "pydantic", "serve/inputs.py",
                          "json/decoder.py", "(loads", "multipart")),
    ("JSON response", ("json/encoder.py", "jsonable_encoder", "serialize_response", "(render",
                       "orjson")),
    ("metrics", ("prometheus_client",)),
    ("batching queue", ("serve/batching.py",)),
    ("HTTP protocol", ("h11", "httptools", "uvicorn/protocols")),
    ("routing + middleware", ("starlette/", "fastapi/", "serve/app.py", "serve/routes/",
                              "serve/registry.py", "serve/errors.py")),
    ("event loop", ("asyncio/", "uvloop", "selectors.py")),
)  # fmt: skip


def stage_of(stack: list[str]) -> str:
    """The stage of one sampled stack (outermost frame first)."""
    for frame in reversed(stack):
        for stage, marks in STAGES:
            if any(mark in frame for mark in marks):
                return stage
    return "other"


def profile(pyspy: str, pid: int, seconds: float, out: Path) -> collections.Counter:
    """py-spy's samples of ``pid`` for ``seconds``, counted by stage."""
    subprocess.run(
        [pyspy, "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", "250",
         "-f", "raw", "-o", str(out), "--nonblocking"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    counts: collections.Counter = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[stage_of(stack.split(";"))] += int(n)
    return counts


def run(args, engine: str, sentences: list[str]) -> dict:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    port = free_port()
    flags = ["--engine", engine, "--threads", str(args.threads), "--metrics", "--metrics-open"]
    if args.beam != 1:
        flags += ["--beam", str(args.beam)]
    flags += args.serve_args.split()
    server = start_aiayn(Path(args.model_dir), port, flags, args.pure_python_http)
    try:
        load(port, sentences, 2, 2, 60, route=args.route)  # warm-up
        counts: collections.Counter = collections.Counter()
        out = Path(f"runs/serve_profile_{engine}.txt")
        out.parent.mkdir(exist_ok=True)
        result: dict = {}

        def send() -> None:
            result.update(
                load(port, sentences, args.clients, args.requests, 300, server.pid,
                     route=args.route)
            )  # fmt: skip

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(0.3)
        counts = profile(pyspy, server.pid, args.seconds, out)
        sender.join()
    finally:
        server.terminate()
        server.wait(60)
    total = sum(counts.values()) or 1
    cpu = result.get("server_cpu_ms_per_sentence") or 0.0
    stages = {
        stage: {"share": round(n / total, 3), "cpu_ms_per_sentence": round(n / total * cpu, 3)}
        for stage, n in counts.most_common()
    }
    return {"engine": engine, "load": result, "samples": total, "stages": stages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--corpus", default="data/ding-de-en")
    parser.add_argument("--engines", default="torch,ctranslate2")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=48, help="requests per client")
    parser.add_argument("--seconds", type=float, default=4, help="py-spy's sampling time")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=1, help="the server's --beam")
    parser.add_argument("--route", default="/translate", help="/translate or /v1/translate")
    parser.add_argument("--serve-args", default="")
    parser.add_argument("--pure-python-http", action="store_true")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    sentences = test_sentences(Path(args.corpus), 1000)
    for engine in args.engines.split(","):
        row = run(args, engine, sentences)
        print(json.dumps(row), flush=True)
        write_result(
            "serve_profile",
            {
                "model_dir": args.model_dir,
                "clients": args.clients,
                "requests_per_client": args.requests,
                "route": args.route,
                "beam": args.beam,
                "server_threads": args.threads,
                "serve_args": args.serve_args,
                "pure_python_http": args.pure_python_http,
                "load_average_1_min": round(os.getloadavg()[0], 2),
                **row,
                "note": args.note,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
