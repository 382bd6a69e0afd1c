"""Serving a directory of Argos Translate packages: ``aiayn serve --argos-packages DIR``
against LibreTranslate serving the same directory, in turn, in one run.

    python bench/argos_pairs.py [models/ding-de-en] [--requests 24] [--detect-per-language 10]

The packages directory (runs/argos_pairs/packages, rebuilt each run) holds three pairs
exported from the shipped model with ``aiayn export --format argos --quantize int8``: de->en
as shipped, and the same weights labelled en->fr and en->es (a real model's size and decoding
length for every pair; the French and Spanish they write is not French or Spanish). de->fr
and de->es pivot through English. Each package is unzipped into the directory as Argos
Translate installs it, and both servers are given that directory: aiayn with
``--argos-packages`` (every pair loaded on first use, ``--max-loaded 0``: none unloaded),
LibreTranslate (scripts/libretranslate_peer.sh's virtual environment and offline settings)
with ``ARGOS_PACKAGES_DIR``. Both decode with one CTranslate2 thread (``--threads 1``,
``ARGOS_INTRA_THREADS=1``) and Argos Translate's beam (4), on LibreTranslate's ``/translate``.

Both servers run at once on 127.0.0.1 and are asked one request at a time, in turn (the
order turned at each request), so that the load of a shared machine falls on both alike:
- the resident memory (RSS, the server process and its children, /proc) once it answers,
  before any translation, and after each pair's first request;
- each direct pair's first request (cold: the pair's load included) and the median of
  ``--requests`` more (warm), one request at a time, one sentence each (the Ding test set's
  German sentences, for the English-source pairs their references);
- the pivots de->fr and de->es: the first request, then, warm (both legs loaded), de->en
  and each pivot in turn, and the pivots' median over the direct one's: what the second leg
  costs. No de->en call gets the German text the one before it had: Argos Translate keeps
  the previous call's translations (``CachedTranslation``), and LibreTranslate answers such a
  repeat, a pivot's first leg too, without decoding;
- ``/detect`` on bench/detect.py's texts (Django's messages, short and long, drawn as it draws
  them) in the four served languages, one text a request: accuracy against the language the
  text is in.

Every load is bounded (a few requests, one at a time), nothing leaves the machine and the
servers are stopped. Appends a record to bench/results/argos_pairs.jsonl; docs/performance.md
shows it (bench/report.py). Where LibreTranslate is not set up or does not start, aiayn's
side alone is recorded and the record's note says why.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, write_result  # noqa: E402
from bench.detect import django_messages, sample  # noqa: E402
from bench.serve_load import (  # noqa: E402
    HOST,
    LT_VENV,
    libretranslate_env,
    start_process,
    test_sentences,
)
from scripts.browser_check import free_port  # noqa: E402

WORK = ROOT / "runs" / "argos_pairs"
PAIRS = (("de", "en"), ("en", "fr"), ("en", "es"))  # packages, loaded in this order
PIVOTS = (("de", "fr"), ("de", "es"))  # through English
LANGUAGES = ("de", "en", "fr", "es")


def build_packages(model_dir: Path) -> Path:
    """The packages directory: the shipped model exported once a pair, unzipped as Argos
    Translate installs a package (its one top folder in the directory)."""
    packages = WORK / "packages"
    shutil.rmtree(packages, ignore_errors=True)
    packages.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for source, target in PAIRS:
        out = WORK / f"{source}_{target}.argosmodel"
        subprocess.run(
            [sys.executable, "-m", "aiayn.cli", "export", str(model_dir), "--format", "argos",
             "--quantize", "int8", "--from", source, "--to", target, "--out", str(out),
             "--force"],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        with zipfile.ZipFile(out) as z:  # written just now by aiayn export
            z.extractall(packages)
    return packages


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB (/proc)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return round(total / 1024, 1)


def post(port: int, path: str, body: dict) -> tuple[float, object]:
    """Seconds to answer one JSON POST, and the answer (raises on a status other than 200)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        start = time.perf_counter()
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - start
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}: {data[:300]!r}")
    return seconds, json.loads(data)


def translate(port: int, text: str, source: str, target: str, outputs: list) -> float:
    """Seconds to translate ``text``; its translation appended to ``outputs``."""
    seconds, answer = post(port, "/translate", {"q": text, "source": source, "target": target})
    outputs.append(answer["translatedText"])
    return seconds


def measure(servers: dict[str, tuple[int, int]], texts: dict[str, list[str]], requests: int,
            detect_items) -> dict[str, dict]:  # fmt: skip
    """Each server's figures (see the module's docstring); ``servers``: {name: (port, pid)},
    all started, asked in turn request by request (the order turned each time)."""
    names = list(servers)
    turn = [0]

    def each(call):  # call(name, port, pid) for every server, in turn
        turn[0] += 1
        for name in names[turn[0] % len(names) :] + names[: turn[0] % len(names)]:
            call(name, *servers[name])

    time.sleep(2)  # whatever a server does just after it answers, done
    out: dict[str, dict] = {
        name: {"rss_mb_no_pair": rss_mb(pid), "pairs": {}, "pivots": {}, "outputs": {}}
        for name, (_, pid) in servers.items()
    }
    seconds: dict[tuple[str, str], list[float]] = {}

    def timed(source, target, text, key=None):
        def call(name, port, pid):
            route = f"{source}-{target}"
            outputs = out[name]["outputs"].setdefault(route, []) if key != "direct" else []
            took = translate(port, text, source, target, outputs)
            seconds.setdefault((name, key or route), []).append(took)

        return call

    for source, target in PAIRS:
        route = f"{source}-{target}"
        sentences = texts[source]
        for name, (port, pid) in servers.items():  # cold: one server at a time, then its RSS
            timed(source, target, sentences[0], f"{route} cold")(name, port, pid)
            out[name]["pairs"][route] = {"rss_mb_after": rss_mb(pid)}
        for sentence in sentences[1 : requests + 1]:
            each(timed(source, target, sentence))
        for name in names:
            out[name]["pairs"][route] |= {
                "cold_s": round(seconds[name, f"{route} cold"][0], 4),
                "warm_median_s": round(statistics.median(seconds[name, route]), 4),
            }
    for name, (_, pid) in servers.items():
        out[name]["rss_mb_all_pairs"] = rss_mb(pid)
    # the pivots, warm, beside the direct pair: at step k de->en translates sentence k, each
    # pivot the next ones in turn, so that no route's de->en leg gets the text the call
    # before it translated (Argos Translate keeps the previous call's translations and
    # LibreTranslate answers a repeat from them)
    german = texts["de"]
    # the first pivoted requests: the first sentence and the last (which no other call has)
    for (source, target), text in zip(PIVOTS, (german[0], german[-1]), strict=True):
        each(timed(source, target, text, f"{source}-{target} first"))
    for k in range(1, requests + 1):
        each(timed("de", "en", german[k], "direct"))
        for i, (source, target) in enumerate(PIVOTS, 1):
            each(timed(source, target, german[k + i]))
    for name in names:
        direct = statistics.median(seconds[name, "direct"])
        out[name]["direct_de_en_beside_pivots_median_s"] = round(direct, 4)
        for source, target in PIVOTS:
            route = f"{source}-{target}"
            median = statistics.median(seconds[name, route])
            out[name]["pivots"][route] = {
                "first_s": round(seconds[name, f"{route} first"][0], 4),
                "warm_median_s": round(median, 4),
                "over_direct_de_en": round(median / direct, 2),
            }
    right: dict[tuple[str, str], list[int]] = {}

    def detect(code, text, length):
        def call(name, port, pid):
            answer = post(port, "/detect", {"q": text})[1]
            got = answer[0]["language"] if answer else None
            right.setdefault((name, length), []).append(int(got == code))

        return call

    for length, items in detect_items.items():
        for code, text in items:
            each(detect(code, text, length))
    for name, (_, pid) in servers.items():
        out[name]["detect_accuracy"] = {
            length: round(statistics.fmean(right[name, length]), 3) for length in detect_items
        }
        out[name]["rss_mb_end"] = rss_mb(pid)
    return out


def start_aiayn(port: int, packages: Path):
    """``aiayn serve --argos-packages`` of this checkout, no model directory besides."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, "-m", "aiayn.cli", "serve", "--argos-packages", str(packages),
               "--port", str(port), "--threads", "1", "--max-loaded", "0"]  # fmt: skip
    return start_process(command, port, env, "/health")


def start_libretranslate(port: int, env: dict):
    command = [str(LT_VENV / "bin" / "libretranslate"), "--host", HOST, "--port", str(port),
               "--load-only", ",".join(LANGUAGES), "--disable-web-ui"]  # fmt: skip
    return start_process(command, port, env, "/languages")


def prepare_libretranslate(packages: Path) -> dict | None:
    """LibreTranslate's environment over ``packages`` (scripts/libretranslate_peer.sh's
    settings; None where it was not run), MiniSBD's splitter files for the four languages left
    empty where its start-up would fetch them (the packages' spaCy sentencizer splits)."""
    env = libretranslate_env(4, tuned=True)
    if env is None:
        return None
    env["ARGOS_PACKAGES_DIR"] = str(packages)
    touch = (
        "import os, sys\nfrom pathlib import Path\nimport argostranslate.sbd\n"
        "from minisbd import models as m\nfolder = Path(m.cache_dir)\n"
        "folder.mkdir(parents=True, exist_ok=True)\n"
        "for code in sys.argv[1:]:\n"
        "    if code in m.MODELS:\n"
        "        (folder / os.path.basename(m.MODELS[code])).touch()\n"
    )
    subprocess.run([str(LT_VENV / "bin" / "python"), "-c", touch, *LANGUAGES], env=env, check=True)
    return env


def lt_version() -> str | None:
    try:
        result = subprocess.run(
            [str(LT_VENV / "bin" / "python"), "-c",
             "from importlib.metadata import version as v; "
             "print(v('libretranslate'), v('argos-translate-lt'), v('ctranslate2'))"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    lt, argos, ct2 = result.stdout.split()
    return f"LibreTranslate {lt} (argos-translate-lt {argos}, CTranslate2 {ct2})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--corpus", default="data/ding-de-en")
    parser.add_argument("--requests", type=int, default=24, help="warm requests a pair")
    parser.add_argument(
        "--detect-per-language", type=int, default=10, help="/detect texts a language and length"
    )
    parser.add_argument("--seed", type=int, default=0, help="bench/detect.py's draw")
    parser.add_argument("--note", default="", help="free text stored with the record")
    args = parser.parse_args()
    packages = build_packages(Path(args.model_dir))
    corpus = Path(args.corpus)
    german = test_sentences(corpus, args.requests + 2 + len(PIVOTS))
    english = [line for line in _lines(corpus / "test.en.gz") if line.strip()][: args.requests + 1]
    texts = {"de": german, "en": english}
    detect_items = sample(django_messages(LANGUAGES), args.detect_per_language, args.seed)
    lt_env = prepare_libretranslate(packages)
    missing = (
        None
        if lt_env
        else "LibreTranslate is not set up here (scripts/libretranslate_peer.sh was not run "
        "or failed): aiayn alone, no comparison"
    )
    started: dict[str, tuple] = {}  # name: (process, port, seconds to answer)
    try:
        for name in ("aiayn", "libretranslate") if lt_env else ("aiayn",):
            port = free_port()
            start = time.perf_counter()
            if name == "aiayn":
                server = start_aiayn(port, packages)
            else:
                try:
                    server = start_libretranslate(port, lt_env)
                except RuntimeError as e:  # it did not start: aiayn alone, and why
                    missing = f"LibreTranslate did not start ({str(e)[-300:]}): aiayn alone"
                    print(missing, file=sys.stderr)
                    continue
            started[name] = (server, port, time.perf_counter() - start)
        servers = measure(
            {name: (port, server.pid) for name, (server, port, _) in started.items()},
            texts,
            args.requests,
            detect_items,
        )
    finally:
        for server, _, _ in started.values():
            server.terminate()
            server.wait(60)
    for name, (_, _, ready) in started.items():
        servers[name] = {"ready_s": round(ready, 2), **servers[name]}
        print(json.dumps({name: servers[name]}, ensure_ascii=False), flush=True)
    outputs = {name: figures.pop("outputs") for name, figures in servers.items()}
    for name, routes in outputs.items():
        servers[name]["output_chars_mean"] = {
            route: round(statistics.fmean(len(t) for t in texts), 1)
            for route, texts in routes.items()
        }
    summary = {}
    if "libretranslate" in servers:
        summary["same_output_share"] = {  # the same packages and beam: the same translations?
            route: round(statistics.fmean(
                x == y for x, y in zip(texts, outputs["libretranslate"][route], strict=True)), 2)
            for route, texts in outputs["aiayn"].items()
        }  # fmt: skip
        a, lt = servers["aiayn"], servers["libretranslate"]
        summary |= {
            "rss_no_pair_vs_libretranslate": round(a["rss_mb_no_pair"] / lt["rss_mb_no_pair"], 2),
            "rss_all_pairs_vs_libretranslate": round(
                a["rss_mb_all_pairs"] / lt["rss_mb_all_pairs"], 2
            ),
            "warm_de_en_vs_libretranslate": round(
                a["pairs"]["de-en"]["warm_median_s"] / lt["pairs"]["de-en"]["warm_median_s"], 2
            ),
        }
    versions = {}
    for package in ("ctranslate2", "lingua-language-detector", "lexilang"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    write_result(
        "argos_pairs",
        {
            "model_dir": args.model_dir,
            "pairs": [f"{s}-{t}" for s, t in PAIRS],
            "pivots": [f"{s}-{t}" for s, t in PIVOTS],
            "packages": "the shipped model exported once a pair (aiayn export --format argos "
            "--quantize int8): de-en as shipped, the same weights labelled en-fr and en-es",
            "requests": args.requests,
            "detect_texts": {k: len(v) for k, v in detect_items.items()},
            "detect_per_language": args.detect_per_language,
            "seed": args.seed,
            "versions": versions,
            "peer": lt_version() if "libretranslate" in servers else None,
            "servers": servers,
            **summary,
            "note": "; ".join(text for text in (args.note, missing) if text),
        },
    )
    return 0


def _lines(path: Path) -> list[str]:
    import gzip

    return gzip.decompress(path.read_bytes()).decode().splitlines()


if __name__ == "__main__":
    sys.exit(main())
