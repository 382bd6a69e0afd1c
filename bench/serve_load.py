"""Load on ``aiayn serve``: concurrent clients on 127.0.0.1, batched server vs unbatched.

Starts the server (``aiayn serve MODEL --threads T``) on the loopback address, once with
dynamic batching (the defaults) and once with ``--max-batch 1`` (every request decoded alone,
one at a time), and sends it N concurrent clients (1, 4, 16, 64), each posting a bounded
number of single-sentence ``/v1/translate`` requests (greedy) with real test sentences, one
after another. Reports throughput (sentences/s), p50/p95/p99 latency, errors and 503s, and
appends the results to bench/results/serve_load.jsonl. Every run is bounded in requests and
time, sends nothing off this machine, and stops its servers.

    python bench/serve_load.py models/ding-de-en

``--engines`` compares engines instead: ``serve --engine ctranslate2`` against CTranslate2
called directly (``Translator.translate_batch`` over the same sentences, greedy, in batches of
the server's ``--max-batch``, on the same CTranslate2 model and threads) and against ``serve``
with the torch engine, and records the ratios. After the server's runs it also calls CTranslate2
directly in batches as large as the server formed on average at each client count, which
parts what the batch size costs (closed-loop clients split into cohorts that reach the
server while another cohort decodes) from what serving costs:

    python bench/serve_load.py models/ding-de-en --engines --clients 16,64 --requests 4

The load comes from wrk where it is installed (Debian's package; ``--client``): one C thread
holds every client's keep-alive connection, each client posting its next request when
answered, for ``--load-seconds`` a load. Without it (or with ``--client python``) each client
is a thread of this process posting with ``http.client``, a bounded number of requests: those
threads took 0.16-0.23 ms of CPU a request (wrk: 0.04), a tenth of a 2-core machine, from the
server they measured.

Every row also records CPU time per sentence: the server process's (from /proc), the load
generator's (wrk's, or this process's while it sends), and CTranslate2's when called
directly. On a machine shared with other work the sentences/s ratios move with the load of
the moment; the CPU-time ratio (CTranslate2's CPU per sentence directly / the server's per
request) does not, and says what serving a sentence over HTTP costs beyond decoding it.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import http.client
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the in-process floor runs this checkout's aiayn, as the servers it starts do
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench.common import ROOT, write_result  # noqa: E402
from scripts.browser_check import free_port  # noqa: E402

from aiayn.data.passages import Passages  # noqa: E402

HOST = "127.0.0.1"  # the load never leaves this machine
WRK = shutil.which("wrk")  # the load generator where installed (Debian's wrk)
DIRECT_SAME = "direct-ctranslate2, the server's batch"  # rows timed at the served batch size


def test_sentences(corpus: Path, n: int) -> list[str]:
    """The first ``n`` test lines that hold one sentence: LibreTranslate's ``/translate`` (of
    either server) cuts a line into its sentences, so a line of two would be two decodes
    served and one in process."""
    lines = gzip.decompress((corpus / "test.de.gz").read_bytes()).decode().splitlines()
    lines = [line for line in lines if line.strip()]
    return [line for line in lines if len(Passages([line], lambda _: True).texts) == 1][:n]


def request_body(route: str, texts: list[str], beam: int = 1) -> str:
    """The JSON body of one request: LibreTranslate's ``/translate`` (``q``, the server's
    beam) or aiayn's ``/v1/translate`` (``text``, one sentence, ``beam`` in the request)."""
    if route == "/translate":
        return json.dumps({"q": texts[0] if len(texts) == 1 else texts, "source": "de",
                           "target": "en"})  # fmt: skip
    body = {"text": texts[0] if len(texts) == 1 else texts}
    return json.dumps(body if beam == 1 else {**body, "beam": beam})


def client(port, sentences, start, count, deadline, out, barrier, beam=1, route="/v1/translate",
           per_request=1):  # fmt: skip
    """Post ``count`` requests one after another on one keep-alive connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    barrier.wait()
    for i in range(count):
        if time.monotonic() > deadline:
            out.append(("not sent", 0.0))
            continue
        first = (start + i) * per_request
        texts = [sentences[(first + k) % len(sentences)] for k in range(per_request)]
        body = request_body(route, texts, beam)
        t0 = time.perf_counter()
        try:
            conn.request("POST", route, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            status = response.status
        except OSError as e:
            status = f"{type(e).__name__}"
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=120)
        out.append((status, time.perf_counter() - t0))
    conn.close()


def start_process(command: list[str], port: int, env: dict, ready: str) -> subprocess.Popen:
    """``command`` (a server on ``port``) in a child process, returned once GET ``ready``
    answers 200."""
    log = ROOT / "runs" / "serve_load" / f"{Path(command[0]).name}-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:  # its log on disk: a pipe nobody reads would stall it
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server stopped: {log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}{ready}", timeout=5) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"{command[0]} did not become ready in 300 s")


def start_aiayn(model_dir: Path, port: int, flags: list[str], pure_python_http=False):
    """``aiayn serve`` from this checkout; ``pure_python_http`` hides uvloop and httptools
    from it (uvicorn then runs h11 on asyncio's own loop)."""
    paths = [str(ROOT / "src"), str(ROOT)]
    if pure_python_http:
        blocker = ROOT / "runs" / "pure-python-http"
        blocker.mkdir(parents=True, exist_ok=True)
        for name in ("uvloop", "httptools"):
            (blocker / f"{name}.py").write_text(f"raise ImportError('{name} hidden')\n")
        paths.insert(0, str(blocker))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "aiayn.cli", "serve", str(model_dir), "--port", str(port)]
    return start_process([*command, *flags], port, env, "/health")


def process_cpu(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by process ``pid`` (None: this one)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # no /proc (not Linux): not recorded
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ms(before: float | None, after: float | None, count: int) -> float | None:
    if before is None or after is None or not count:
        return None
    return round((after - before) / count * 1000, 3)


def metrics_text(port: int) -> str:
    """The server's /metrics ("" where it has none: a peer)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
        return text if response.status == 200 else ""
    except OSError:
        return ""
    finally:
        conn.close()


def batch_totals(port: int, text: str | None = None) -> tuple[float, float, float]:
    """(texts, model calls, seconds in model calls) the server has batched so far, from its
    /metrics."""
    text = metrics_text(port) if text is None else text
    totals = dict.fromkeys(("texts_sum", "texts_count", "duration_seconds_sum"), 0.0)
    for line in text.splitlines():
        for kind in totals:
            if line.startswith(f"aiayn_batch_{kind}{{"):
                totals[kind] += float(line.rsplit(" ", 1)[1])
    return totals["texts_sum"], totals["texts_count"], totals["duration_seconds_sum"]


def batch_histogram(text: str) -> dict[float, float]:
    """The server's batch-size histogram: {upper bound: batches so far} (cumulative)."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("aiayn_batch_texts_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            value = float(line.rsplit(" ", 1)[1])
            key = float("inf") if bound == "+Inf" else float(bound)
            buckets[key] = buckets.get(key, 0.0) + value
    return buckets


def batch_sizes(before: str, after: str, texts: float) -> list[int]:
    """The sizes of the batches formed between two /metrics readings, from the histogram's
    buckets (exact where a bucket holds one size; else the bucket's batches share what the
    exact ones leave of ``texts``)."""
    low, high = batch_histogram(before), batch_histogram(after)
    bounds = sorted(high)
    sizes: list[int] = []
    wide: list[tuple[float, float, int]] = []
    previous, below = 0.0, 0.0
    for bound in bounds:
        n = int(round((high[bound] - low.get(bound, 0.0)) - below))
        below += n
        if n and bound - previous <= 1:
            sizes += [int(bound)] * n
        elif n:
            wide.append((previous, bound, n))
        previous = bound
    left = texts - sum(sizes)
    count = sum(n for _, _, n in wide)
    for lo, hi, n in wide:  # the rest of the texts spread over the wide buckets' batches
        size = min(max(round(left / count), int(lo) + 1), int(min(hi, 1 << 20)))
        sizes += [size] * n
    return sizes


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


WRK_SCRIPT = """\
-- bench/serve_load.py's closed-loop clients under wrk: each connection posts its next body
-- when answered. Arguments: BODIES (a file of one JSON body a line, sent in turn), PATH.
bodies, path = {}, "/"
ok, busy, failed, sent = 0, 0, 0, 0
threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    bodies[#bodies + 1] = line
  end
  path = args[2]
end

function request()
  sent = sent + 1
  local headers = {["Host"] = wrk.host, ["Content-Type"] = "application/json"}
  return wrk.format("POST", path, headers, bodies[(sent - 1) % #bodies + 1])
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
  elseif status == 503 then
    busy = busy + 1
  else
    failed = failed + 1
  end
end

function done(summary, latency, requests)
  local counts = {ok = 0, busy = 0, failed = 0}
  for _, thread in ipairs(threads) do
    for name, _ in pairs(counts) do
      counts[name] = counts[name] + thread:get(name)
    end
  end
  local e = summary.errors
  io.write(string.format(
    "AIAYN-WRK {\\"ok\\": %d, \\"busy\\": %d, \\"failed\\": %d, \\"socket_errors\\": %d, " ..
    "\\"seconds\\": %.6f, \\"p50_s\\": %.6f, \\"p95_s\\": %.6f, \\"p99_s\\": %.6f, " ..
    "\\"mean_s\\": %.6f}\\n",
    counts.ok, counts.busy, counts.failed, e.connect + e.read + e.write + e.timeout,
    summary.duration / 1e6, latency:percentile(50) / 1e6, latency:percentile(95) / 1e6,
    latency:percentile(99) / 1e6, latency.mean / 1e6))
end
"""


def python_clients(port, sentences, clients, requests, seconds, beam, route, per_request) -> dict:
    """``clients`` threads of this process, each posting with ``http.client`` (``client``)."""
    results: list[list] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client,
            args=(
                port,
                sentences,
                c * requests,
                requests,
                deadline,
                results[c],
                barrier,
                beam,
                route,
                per_request,
            ),  # fmt: skip
        )
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    own = process_cpu()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    own_after = process_cpu()
    flat = [r for rs in results for r in rs]
    ok = [lat for status, lat in flat if status == 200]
    busy = sum(status == 503 for status, _ in flat)
    unsent = sum(status == "not sent" for status, _ in flat)
    return {
        "requests": clients * requests,
        "ok": len(ok),
        "errors": len(flat) - len(ok) - busy - unsent,
        "rejected_503": busy,
        "not_sent_time_limit": unsent,
        "lost": clients * requests - len(flat),
        "seconds": wall,
        "p50_s": percentile(ok, 0.50),
        "p95_s": percentile(ok, 0.95),
        "p99_s": percentile(ok, 0.99),
        "mean_s": statistics.fmean(ok) if ok else None,
        "client_cpu_s": own_after - own,
    }


def wrk_clients(port, sentences, clients, requests, seconds, beam, route, per_request) -> dict:
    """``clients`` keep-alive connections of one ``wrk`` thread (C, epoll: a fifth of the
    CPU a request of ``python_clients``' threads, which share the cores with the server),
    each posting its next request when answered, for ``seconds`` (whole; ``requests`` does
    not apply: wrk runs for a time). The bodies are ``python_clients``' own, in the same order
    (by request, not by client). Its latencies are of every answer (200 or not); the
    requests under way when the time is up are not counted."""
    folder = ROOT / "runs" / "serve_load"
    folder.mkdir(parents=True, exist_ok=True)
    script, bodies = folder / "wrk.lua", folder / f"wrk-bodies-{port}-{clients}.jsonl"
    script.write_text(WRK_SCRIPT)
    lines = []
    for j in range(len(sentences)):  # then again from the first
        texts = [sentences[(j * per_request + k) % len(sentences)] for k in range(per_request)]
        lines.append(request_body(route, texts, beam))
    bodies.write_text("\n".join(lines) + "\n")
    command = [WRK, "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "300s",
               "-s", str(script), f"http://{HOST}:{port}", "--", str(bodies), route]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    bodies.unlink()
    found = [line for line in out.splitlines() if line.startswith("AIAYN-WRK ")]
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {out[-2000:]}")
    got = json.loads(found[0].split(" ", 1)[1])
    return {
        "requests": got["ok"] + got["busy"] + got["failed"] + got["socket_errors"],
        "ok": got["ok"],
        "errors": got["failed"],
        "rejected_503": got["busy"],
        "not_sent_time_limit": 0,
        "lost": got["socket_errors"],
        "seconds": got["seconds"],
        **{key: got[key] for key in ("p50_s", "p95_s", "p99_s", "mean_s")},
        "client_cpu_s": usage.ru_utime + usage.ru_stime,
    }


def load(
    port: int,
    sentences: list[str],
    clients: int,
    requests: int,
    seconds: float,
    server_pid: int | None = None,
    beam: int = 1,
    route: str = "/v1/translate",
    per_request: int = 1,
    tool: str = "python",
) -> dict:
    """``clients`` closed-loop clients, ``requests`` each of ``per_request`` sentences within
    ``seconds``, sent by ``tool`` ("python": ``python_clients``), or for ``seconds`` ("wrk":
    ``wrk_clients``); throughput, latency, errors, CPU and (from an aiayn server's /metrics)
    the batches."""
    metrics_before = metrics_text(port)
    before = batch_totals(port, metrics_before)
    send = wrk_clients if tool == "wrk" else python_clients
    server = process_cpu(server_pid) if server_pid else None
    sent = send(port, sentences, clients, requests, seconds, beam, route, per_request)
    server_after = process_cpu(server_pid) if server_pid else None
    metrics_after = metrics_text(port)
    totals = batch_totals(port, metrics_after)
    texts, calls, in_calls = (a - b for a, b in zip(totals, before, strict=True))
    done, wall = sent["ok"] * per_request, sent["seconds"]
    row = {
        "clients": clients,
        "sentences_per_request": per_request,
        "requests": sent["requests"],
        **{
            key: sent[key]
            for key in ("ok", "errors", "rejected_503", "not_sent_time_limit", "lost")
        },  # fmt: skip
        "seconds": round(wall, 3),
        "sentences_per_s": round(done / wall, 2),
        **{
            key: round(sent[key], 4) if sent[key] is not None else None
            for key in ("p50_s", "p95_s", "p99_s", "mean_s")
        },  # fmt: skip
        "server_cpu_ms_per_sentence": cpu_ms(server, server_after, done),
        "client_cpu_ms_per_sentence": cpu_ms(0.0, sent["client_cpu_s"], done),
        "mean_batch_texts": round(texts / calls, 1) if calls else None,
        # the model calls' wall time per text: decoding plus what the worker does around it
        "batch_ms_per_text": round(in_calls / texts * 1000, 3) if texts else None,
        "worker_busy": round(in_calls / wall, 2),
    }
    if calls:
        sizes = batch_sizes(metrics_before, metrics_after, texts)
        row["batch_sizes"] = dict(sorted(collections.Counter(sizes).items()))
    return row


def direct_ctranslate2(
    model_dir: Path, sentences: list[str], threads: int, batch: int, beam: int = 1
) -> dict:
    """Sentences/s of ``ctranslate2.Translator`` alone on ``sentences``: sentencepiece pieces
    plus eos in, ``beam`` (1: greedy; else length penalty 0.6, CTranslate2's own stopping
    rule), ``batch`` sentences per call (the server's --max-batch)."""
    import ctranslate2

    from aiayn.interop.ctranslate2 import cached_model
    from aiayn.modeldir.tokenizer_files import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    path = cached_model(model_dir)  # the conversion the server's engine decodes with
    translator = ctranslate2.Translator(str(path), device="cpu", intra_threads=threads)
    tokens = [tokenizer.pieces(s) + ["</s>"] for s in sentences]
    options = dict(beam_size=beam, length_penalty=0.6 if beam > 1 else 0.0)
    translator.translate_batch(tokens[:batch], **options)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(tokens), batch):
        results = translator.translate_batch(
            tokens[i : i + batch], max_decoding_length=256, **options
        )
        [tokenizer.sp.decode_pieces(r.hypotheses[0]) for r in results]  # as the server does
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"server": "direct-ctranslate2", "sentences": len(tokens), "batch": batch,
            "seconds": round(wall, 3), "sentences_per_s": round(len(tokens) / wall, 2),
            "cpu_ms_per_sentence": round(cpu / len(tokens) * 1000, 3)}  # fmt: skip


def span(args, share: float = 1.0) -> float:
    """A load's time: wrk's run (``--load-seconds``, times ``share``; at least a second), or
    the Python clients' limit (``--max-seconds``)."""
    return max(1.0, args.load_seconds * share) if args.client == "wrk" else args.max_seconds


def client_name(tool: str) -> str:
    """What sent the load, as the records name it."""
    if tool == "wrk":
        version = subprocess.run([WRK, "--version"], capture_output=True, text=True).stdout
        return f"{version.split(' [', 1)[0].strip()}: one thread, a keep-alive connection a client"
    return "python: a thread a client, http.client, a keep-alive connection each"


def pin_to_cores(count: int) -> list[int] | None:
    """Pin this process, and so the servers, the load generator and the in-process floor it
    starts, to ``count`` of the CPUs it may use, each on another physical core (the
    lowest-numbered, by the kernel's topology): a run on a larger host then stands for one
    on a machine of ``count`` cores. None where there are not that many cores."""
    chosen, cores = [], set()
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            core = tuple(
                (topology / name).read_text().strip() for name in ("physical_package_id", "core_id")
            )
        except OSError:
            core = (str(cpu),)  # no topology: each CPU a core of its own
        if core not in cores:
            cores.add(core)
            chosen.append(cpu)
        if len(chosen) == count:
            os.sched_setaffinity(0, chosen)
            return chosen
    return None


def run_settings(args) -> dict:
    """What every record of this script says about its run."""
    return {
        "model_dir": args.model_dir,
        "requests_per_client": args.requests if args.client == "python" else None,
        "seconds_per_load": args.load_seconds if args.client == "wrk" else None,
        "server_threads": args.threads,
        "serve_args": args.serve_args,
        "client": client_name(args.client),
        "request": "POST /v1/translate, one test sentence, "
        + ("greedy" if args.beam == 1 else f"beam {args.beam}"),
    }


def compare_engines(args, clients: list[int], sentences: list[str]) -> int:
    """serve --engine ctranslate2 vs CTranslate2 directly vs serve --engine torch."""
    model_dir = Path(args.model_dir)
    load_before = [round(x, 2) for x in os.getloadavg()]
    most = max(clients)
    used = [sentences[i % len(sentences)] for i in range(most * args.requests)]
    rows = [direct_ctranslate2(model_dir, used, args.threads, 64, args.beam)]
    print(json.dumps(rows[-1]), flush=True)
    served_rows = run_mode(
        args, "serve-ctranslate2", ["--engine", "ctranslate2"], clients, sentences
    )
    rows += served_rows
    rows.append(direct_ctranslate2(model_dir, used, args.threads, 64, args.beam))  # load drifts
    print(json.dumps(rows[-1]), flush=True)
    # CTranslate2 alone in batches as large as the server's were: what the batch size the
    # clients' timing allowed costs, apart from what serving costs
    same_batch = {}
    for row in served_rows:
        batch = max(1, round(row["mean_batch_texts"] or 1))
        same = direct_ctranslate2(model_dir, used, args.threads, batch, args.beam)
        same_batch[row["clients"]] = {**same, "server": DIRECT_SAME, "for_clients": row["clients"]}
        rows.append(same_batch[row["clients"]])
        print(json.dumps(rows[-1]), flush=True)
    rows += run_mode(args, "serve-torch", ["--engine", "torch"], clients, sentences)
    direct_rows = [r for r in rows if r["server"] == "direct-ctranslate2"]
    direct = statistics.fmean(r["sentences_per_s"] for r in direct_rows)
    direct_cpu = statistics.fmean(r["cpu_ms_per_sentence"] for r in direct_rows)
    by = {(r["server"], r.get("clients")): r["sentences_per_s"] for r in rows}
    served = {r["clients"]: r for r in served_rows}
    summary = {
        "direct_ctranslate2_sentences_per_s": round(direct, 2),
        **{
            f"serve_ct2_over_direct_at_{n}_clients": round(by[("serve-ctranslate2", n)] / direct, 2)
            for n in clients
        },
        "direct_ctranslate2_cpu_ms_per_sentence": round(direct_cpu, 3),
        **{
            f"serve_ct2_over_direct_by_cpu_at_{n}_clients": (
                round(direct_cpu / served[n]["server_cpu_ms_per_sentence"], 2)
                if served[n]["server_cpu_ms_per_sentence"]
                else None
            )
            for n in clients
        },
        **{
            f"serve_ct2_over_direct_same_batch_at_{n}_clients": round(
                by[("serve-ctranslate2", n)] / same_batch[n]["sentences_per_s"], 2
            )
            for n in clients
        },
        **{
            f"direct_at_served_batch_over_direct_at_{n}_clients": round(
                same_batch[n]["sentences_per_s"] / direct, 2
            )
            for n in clients
        },
        **{
            f"serve_ct2_over_serve_torch_at_{n}_clients": round(
                by[("serve-ctranslate2", n)] / max(by[("serve-torch", n)], 1e-9), 2
            )
            for n in clients
        },
    }
    print(json.dumps(summary))
    write_result(
        "serve_load",
        {
            **run_settings(args),
            "compare": "engines",
            "load_average_1_5_15_min": {
                "before": load_before,
                "after": [round(x, 2) for x in os.getloadavg()],
            },
            "rows": rows,
            **summary,
            "note": args.note,
        },
    )
    return 0


LT_VENV = ROOT / ".venv-lt"  # scripts/libretranslate_peer.sh
LT_ENV = ROOT / "runs" / "lt" / "env"
# (server, its shapes of load): 1 client for latency, 16 and 64 with 1 and 8 sentences each
PEER_LOADS = ((1, 1), (16, 1), (16, 8), (64, 1), (64, 8))


def libretranslate_env(beam: int, tuned: bool) -> dict | None:
    """The environment LibreTranslate runs in (scripts/libretranslate_peer.sh wrote it);
    None where that set-up was not run."""
    if not (LT_VENV / "bin" / "libretranslate").is_file() or not LT_ENV.is_file():
        return None
    env = {**os.environ, "ARGOS_BEAM_SIZE": str(beam)}
    for line in LT_ENV.read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    if tuned:
        env["ARGOS_INTRA_THREADS"] = "1"
    return env


def start_libretranslate(port: int, env: dict) -> subprocess.Popen:
    command = [str(LT_VENV / "bin" / "libretranslate"), "--host", HOST, "--port", str(port),
               "--load-only", "de,en", "--disable-web-ui"]  # fmt: skip
    return start_process(command, port, env, "/languages")


def inprocess(
    model_dir: Path,
    sentences: list[str],
    sizes: dict,
    beam: int,
    threads: int,
    engine="auto",
    decoders: int = 0,
    device: str = "auto",
) -> dict:
    """The served engine in this process (``aiayn.load`` with the server's default engine
    and device, ``threads`` and ``decoders`` as the server's --threads and --decoders,
    ``translate`` as the /translate route calls it) on ``sentences`` in batches of the sizes
    the server formed (``sizes``: {size: batches}), ``decoders`` batches at a time as the
    server's workers take them."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    import aiayn
    from aiayn.serve.config import serving_decoders, serving_threads

    decoders = decoders or serving_decoders()
    torch.set_num_threads(threads or serving_threads(decoders))  # as `aiayn serve --threads`
    # as the server's --engine and --device (aiayn.load's own default device is the CPU)
    api = aiayn.load(model_dir, engine=engine, decoders=decoders, device=device)
    batches, start = [], 0
    for size, count in sorted(sizes.items()):
        for _ in range(count):
            batches.append([sentences[(start + k) % len(sentences)] for k in range(int(size))])
            start += int(size)
    api.translate(batches[0], beam=beam, scores=False)  # warm-up (and CTranslate2's conversion)
    passes = []  # the batches three times over; the median pass
    with ThreadPoolExecutor(decoders) as workers:
        for _ in range(3):
            wall = time.perf_counter()
            list(workers.map(lambda batch: api.translate(batch, beam=beam, scores=False), batches))
            passes.append(time.perf_counter() - wall)
    wall = statistics.median(passes)
    done = sum(len(b) for b in batches)
    engine = api.engines["greedy" if beam == 1 else "beam"]
    return {"engine": engine, "batches": len(batches), "sentences": done,
            "seconds": round(wall, 3), "sentences_per_s": round(done / wall, 2),
            "threads": threads or serving_threads(decoders), "decoders": decoders}  # fmt: skip


def floor_rows(args, model_dir: Path, sentences: list[str], served: list[dict]) -> list[dict]:
    """The served engine in process at the batch sizes of each served row of one sentence a
    request under 16 or more clients."""
    out = []
    for row in served:
        if row["clients"] < 16 or row["sentences_per_request"] != 1 or not row.get("batch_sizes"):
            continue
        sizes = {int(k): v for k, v in row["batch_sizes"].items()}
        flags = shlex.split(args.serve_args)
        engine = flags[flags.index("--engine") + 1] if "--engine" in flags else "auto"
        decoders = int(flags[flags.index("--decoders") + 1]) if "--decoders" in flags else 0
        device = flags[flags.index("--device") + 1] if "--device" in flags else "auto"
        floor = inprocess(
            model_dir, sentences, sizes, row["beam"], args.threads, engine, decoders, device
        )
        floor = {"server": "aiayn in process", "beam": row["beam"], "repeat": row["repeat"],
                 "for_clients": row["clients"], **floor, "batch_sizes": row["batch_sizes"]}  # fmt: skip
        print(json.dumps(floor), flush=True)
        out.append(floor)
    return out


def compare_peers(args, sentences: list[str]) -> int:
    """`aiayn serve` (default flags) against LibreTranslate tuned and stock, same client,
    sentences and loads, each server alone, interleaved; the in-process floor beside."""
    model_dir = Path(args.model_dir)
    load_before = [round(x, 2) for x in os.getloadavg()]
    beams = [int(b) for b in args.beams.split(",")]
    have_lt = libretranslate_env(1, True) is not None
    if not have_lt:
        print("LibreTranslate is not set up (scripts/libretranslate_peer.sh): aiayn alone")
    names = ["aiayn"] + (["libretranslate-tuned", "libretranslate-stock"] if have_lt else [])
    if not args.stock:
        names = [name for name in names if name != "libretranslate-stock"]
    rows: list[dict] = []
    floors: list[dict] = []
    for beam in beams:
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in order:
                port = free_port()
                if name == "aiayn":
                    flags = [
                        "--metrics",
                        "--metrics-open",
                        *(["--beam", str(beam)] if beam > 1 else []),
                    ]
                    if args.threads:
                        flags += ["--threads", str(args.threads)]
                    server = start_aiayn(model_dir, port, [*flags, *shlex.split(args.serve_args)])
                else:
                    env = libretranslate_env(beam, name.endswith("tuned"))
                    server = start_libretranslate(port, env)
                try:
                    # warm-up: the bars' load once over (a first pass costs each server
                    # more CPU a sentence, as the floor's first pass in process does)
                    load(port, sentences, 16, max(2, args.sentences // 16), span(args, 0.5),
                         route="/translate", tool=args.client)  # fmt: skip
                    for clients, per in PEER_LOADS:
                        each = max(2, args.sentences // (clients * per))
                        measured = load(port, sentences, clients, each, span(args),
                                        server.pid, route="/translate", per_request=per,
                                        tool=args.client)  # fmt: skip
                        row = {"server": name, "beam": beam, "repeat": repeat, **measured}
                        print(json.dumps(row), flush=True)
                        rows.append(row)
                finally:
                    server.terminate()
                    server.wait(60)
                if name == "aiayn":  # the floor, in the same minutes as the server it floors
                    floors += floor_rows(args, model_dir, sentences, rows[-len(PEER_LOADS) :])
    summary = peer_summary(rows, floors, beams)
    print(json.dumps(summary))
    write_result(
        "serve_load",
        {
            "model_dir": args.model_dir,
            "compare": "peers",
            "request": "POST /translate (LibreTranslate's API), JSON, source de, target en",
            "serve_args": args.serve_args or "(default flags)",
            "server_threads": args.threads or "default",
            "client": client_name(args.client),
            "sentences_per_load": args.sentences if args.client == "python" else None,
            "seconds_per_load": args.load_seconds if args.client == "wrk" else None,
            "repeats": args.repeats,
            "warm_up": "each server: 16 clients, one sentence a request, the load's sentences",
            "peers": (
                "LibreTranslate 1.9.6 (argos-translate-lt 1.12.1) serving aiayn's "
                "`aiayn export --format argos` package; tuned: ARGOS_INTRA_THREADS=1; beam: "
                "ARGOS_BEAM_SIZE"
                if have_lt
                else "none: scripts/libretranslate_peer.sh was not run, aiayn alone"
            ),
            "load_average_1_5_15_min": {
                "before": load_before,
                "after": [round(x, 2) for x in os.getloadavg()],
            },
            "rows": rows,
            "in_process": floors,
            **summary,
            "note": args.note,
        },
    )
    return 0


def peer_summary(rows: list[dict], floors: list[dict], beams: list[int]) -> dict:
    """The ratios the bars name: aiayn over tuned (and stock) LibreTranslate at 16 clients
    and one sentence a request, served over in-process, p50 latency at 1 client."""

    def mean(server: str, beam: int, clients: int, per: int, key: str) -> float | None:
        values = [r[key] for r in rows if r["server"] == server and r["beam"] == beam
                  and r["clients"] == clients and r["sentences_per_request"] == per]  # fmt: skip
        return statistics.fmean(values) if values else None

    summary: dict = {"errors": sum(r["errors"] + r["lost"] for r in rows)}
    for beam in beams:
        tag = "greedy" if beam == 1 else f"beam{beam}"
        ours = mean("aiayn", beam, 16, 1, "sentences_per_s")
        for peer, suffix in (("libretranslate-tuned", ""), ("libretranslate-stock", "_stock")):
            theirs = mean(peer, beam, 16, 1, "sentences_per_s")
            if ours and theirs:
                summary[f"vs_libretranslate{suffix}_{tag}"] = round(ours / theirs, 2)
            p50, their_p50 = mean("aiayn", beam, 1, 1, "p50_s"), mean(peer, beam, 1, 1, "p50_s")
            if p50 and their_p50:
                summary[f"p50_1_client_vs_libretranslate{suffix}_{tag}"] = round(p50 / their_p50, 2)
        ratios: dict[str, list[float]] = {}  # each round's served row over its own floor
        for floor in floors:
            if floor["beam"] != beam:
                continue
            served = [r["sentences_per_s"] for r in rows if r["server"] == "aiayn"
                      and r["beam"] == beam and r["repeat"] == floor["repeat"]
                      and r["clients"] == floor["for_clients"]
                      and r["sentences_per_request"] == 1]  # fmt: skip
            key = f"served_vs_inprocess_{tag}_{floor['engine']}_{floor['for_clients']}_clients"
            ratios.setdefault(key, []).append(served[0] / floor["sentences_per_s"])
        summary.update({k: round(statistics.fmean(v), 2) for k, v in ratios.items()})
    return summary


def run_mode(args, name: str, flags: list[str], clients: list[int], sentences) -> list[dict]:
    port = free_port()
    flags = [*flags, *shlex.split(args.serve_args)]
    server = start_aiayn(
        Path(args.model_dir),
        port,
        ["--threads", str(args.threads), "--metrics", "--metrics-open", *flags],
    )
    rows = []
    try:
        load(port, sentences, 2, 2, span(args, 0.25), beam=args.beam, tool=args.client)  # warm-up
        for n in clients:
            measured = load(
                port,
                sentences,
                n,
                args.requests,
                span(args),
                server.pid,
                args.beam,
                tool=args.client,
            )
            row = {"server": name, **measured}
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
    parser.add_argument(
        "--requests", type=int, default=8, help="--client python: requests per client"
    )
    parser.add_argument("--max-seconds", type=float, default=180, help="per client count")
    parser.add_argument(
        "--threads", type=int, default=None, help="the server's torch threads (1; --peers: default)"
    )
    parser.add_argument("--note", default="", help="free text stored with the results")
    parser.add_argument("--beam", type=int, default=1, help="each request's beam (1: greedy)")
    parser.add_argument(
        "--serve-args", default="", help="more `aiayn serve` flags, e.g. '--batch-wait-ms 2'"
    )
    parser.add_argument(
        "--engines",
        action="store_true",
        help="compare serve --engine ctranslate2, CTranslate2 directly and serve --engine torch",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="aiayn serve (default flags) against LibreTranslate tuned and stock "
        "(scripts/libretranslate_peer.sh), on /translate, with the in-process floor",
    )
    parser.add_argument("--beams", default="1,4", help="--peers: the beams compared")
    parser.add_argument("--repeats", type=int, default=1, help="--peers: rounds per beam")
    parser.add_argument(
        "--no-stock",
        dest="stock",
        action="store_false",
        help="--peers: leave out stock LibreTranslate (the bars name the tuned one)",
    )
    parser.add_argument(
        "--sentences", type=int, default=512, help="--peers, --client python: sentences a load"
    )
    parser.add_argument(
        "--client",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="what sends the load: wrk (Debian's, one thread, a keep-alive connection a "
        "client), python (a thread a client, http.client), or auto: wrk where installed",
    )
    parser.add_argument(
        "--load-seconds", type=float, default=4, help="--client wrk: each load's time"
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=None,
        help="run everything (servers, load, floor) on this many CPUs, each on another "
        "physical core: a larger host measured as a smaller one (the records' cores_usable)",
    )
    args = parser.parse_args()
    if args.cores is not None:
        pinned = pin_to_cores(args.cores)
        if pinned is None:
            parser.error(f"--cores {args.cores}: this process may use fewer physical cores")
        print(f"pinned to CPUs {pinned}", flush=True)
    if args.client == "wrk" and WRK is None:
        parser.error("--client wrk: wrk is not installed (apt-get install wrk)")
    if args.client == "auto":
        args.client = "wrk" if WRK else "python"
        if args.client == "python":
            print("wrk is not installed (apt-get install wrk): the load comes from Python threads")
    if args.threads is None:
        args.threads = 0 if args.peers else 1
    clients = [int(c) for c in args.clients.split(",")]
    sentences = test_sentences(Path(args.corpus), 1000)
    if args.peers:
        return compare_peers(args, sentences)
    if args.engines:
        return compare_engines(args, clients, sentences)
    # the torch engine, as the recorded runs (serve's default is now auto; --serve-args
    # '--engine auto' measures that)
    batched = run_mode(args, "batched", ["--engine", "torch"], clients, sentences)
    unbatched_clients = [int(c) for c in args.unbatched_clients.split(",") if c]
    flags = ["--engine", "torch", "--max-batch", "1"]
    alone = run_mode(args, "unbatched", flags, unbatched_clients, sentences)
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
            **run_settings(args),
            "rows": batched + alone,
            **summary,
            "note": args.note,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
