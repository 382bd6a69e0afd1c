"""Memory and time of the data path against the corpus size: tokenizer, token store, training.

    python bench/scale.py --pairs 250000,1000000,4500000 --ranks 1,2 \
        --set train.activation_checkpointing=true --set train.trim_heap_every=1
    python bench/scale.py --pairs 1000000 --ranks 2           # two torchrun processes too
    python bench/scale.py --corpus data/my-corpus --pairs 0   # the user's prepared corpus

For each size, a corpus of N pairs at the length of WMT14 English-German (about 23 German and
29 English words a pair: bundled Ding and LibreOffice pairs joined, drawn with a fixed seed;
kept in --work between runs) goes through three processes, each under ``/usr/bin/time -v``:

* ``tokenizer``: the shared BPE (``data.vocab_size`` of --config) on its bounded sample;
* ``encoding``: ``aiayn train --prepare-only``, which writes the token stores;
* ``train``: ``aiayn train`` for --steps steps with the tokenizer and stores in place, the
  base model at --max-tokens, then resumed for one more step; with --ranks 2, under torchrun
  (each rank's peak RSS read from /proc while it runs).

Each records wall time, peak RSS, the store's bytes on disk against its token count, the
seconds that checking the stores' content takes as every training start does (each file's
SHA-256 and the ids against the vocabulary, read from the page cache right after encoding;
``store.check_s``, with ``store.sha256_gb_s``, one core's SHA-256 rate on bytes in memory), the
time from the command to the start of its first step (when metrics.jsonl gets step 1's
line, less that step's own duration), and the share of step time spent waiting for batches. A ``baseline`` run trains the same model on a
20,000-pair corpus (batches as full as a large corpus's), so that what the data adds to the
training RSS as the corpus grows is the difference.
Appends one record per size to bench/results/scale.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, write_result  # noqa: E402

SOURCES = ("data/ding-de-en", "data/libreoffice-help-de-en")
# the baseline's corpus: enough pairs that its batches are as full as a large corpus's
BASELINE_PAIRS = 20_000
GERMAN_WORDS = 23  # WMT14 English-German: ~23 German, ~29 English words a pair (the mean)


def bundled_pairs() -> list[tuple[str, str]]:
    pairs = []
    for corpus in SOURCES:
        with (
            gzip.open(ROOT / corpus / "train.de.gz", "rt") as de,
            gzip.open(ROOT / corpus / "train.en.gz", "rt") as en,
        ):
            pairs += [(d.strip(), e.strip()) for d, e in zip(de, en, strict=True) if d.strip()]
    return pairs


def write_corpus(directory: Path, n_train: int, n_valid: int = 1000, seed: int = 0) -> None:
    """``train`` and ``valid`` splits of pairs joined from the bundled ones until the German
    side reaches a length drawn around the WMT14 mean (streamed to disk in blocks)."""
    if (directory / "stats.json").is_file():
        return
    pairs = bundled_pairs()
    words = np.asarray([len(d.split()) for d, _ in pairs])
    rng = np.random.default_rng(seed)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for split, n in (("train", n_train), ("valid", n_valid)):
        with (
            gzip.open(tmp / f"{split}.de.gz", "wt", compresslevel=1) as de,
            gzip.open(tmp / f"{split}.en.gz", "wt", compresslevel=1) as en,
        ):
            for start in range(0, n, 100_000):
                m = min(100_000, n - start)
                # the joined text overshoots its target by half a pair on average
                targets = np.maximum(rng.gamma(2.0, (GERMAN_WORDS - 4) / 2.0, m), 1)
                draws = rng.integers(len(pairs), size=(m, 12))
                src, tgt = [], []
                for row, target in zip(draws, targets, strict=True):
                    d, e, w = [], [], 0
                    for i in row:
                        d.append(pairs[i][0])
                        e.append(pairs[i][1])
                        w += words[i]
                        if w >= target:
                            break
                    src.append(" ".join(d))
                    tgt.append(" ".join(e))
                de.write("\n".join(src) + "\n")
                en.write("\n".join(tgt) + "\n")
    (tmp / "stats.json").write_text(json.dumps({"pairs": {"train": n_train, "valid": n_valid}}))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def timed(cmd: list[str], env: dict, watch: Path | None = None, skip: int = 0) -> dict:
    """Run ``cmd`` under /usr/bin/time -v: wall seconds, peak RSS (MB); with ``watch`` (a
    metrics.jsonl, of which the first ``skip`` lines are older), the seconds to the start of
    its first training step, and the peak RSS of each
    process below the command (torchrun's ranks), read from /proc while they run."""
    time_log = Path(env["AIAYN_BENCH_TMP"]) / "time.log"
    start = time.perf_counter()
    proc = subprocess.Popen(
        ["/usr/bin/time", "-v", "-o", str(time_log), *cmd],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_step, peaks = None, {}
    before = 0  # training records already in ``watch``
    if watch is not None and watch.is_file():
        before = sum('"loss"' in line for line in watch.read_text().splitlines()[:skip])
    while proc.poll() is None:
        if watch is not None and first_step is None and watch.is_file():
            lines = [line for line in watch.read_text().splitlines() if '"loss"' in line]
            old = [json.loads(line)["elapsed_s"] for line in lines[:before]]
            if len(lines) > before:  # the first step ended: it began its duration before
                took = json.loads(lines[before])["elapsed_s"] - (old[-1] if old else 0.0)
                first_step = time.perf_counter() - start - took
        for pid, name, hwm in _descendants(proc.pid):
            if "aiayn" in name and "torch.distributed.run" not in name:
                peaks[pid] = max(peaks.get(pid, 0), hwm)
        time.sleep(0.05)
    wall = time.perf_counter() - start
    out, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    log = time_log.read_text()
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1))
    result = {"wall_s": round(wall, 2), "peak_rss_mb": round(rss_kb / 1024, 1)}
    if first_step is not None:
        result["first_step_s"] = round(first_step, 2)
    if len(peaks) > 1:
        result["rank_peak_rss_mb"] = sorted(round(v / 1024, 1) for v in peaks.values())
    return result


def _descendants(root: int):
    """(pid, command line, VmHWM in kB) of every process below ``root``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo, out = list(children.get(root, [])), []
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = Path(f"/proc/{pid}/status").read_text()
            hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
        except (OSError, AttributeError):
            continue
        out.append((pid, cmdline, hwm))
    return out


def wait_share(metrics: Path) -> float | None:
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    shares = [r["data_wait_share"] for r in records if "data_wait_share" in r]
    return round(float(np.mean(shares)), 4) if shares else None


def check_stores(run: Path) -> dict:
    """Seconds to check the content of every store of ``run`` as a training start does (the
    digests and the ids against the vocabulary), and one core's SHA-256 rate in GB/s."""
    from aiayn.data.store import examine
    from aiayn.modeldir.tokenizer_files import load_tokenizer

    vocab_size = load_tokenizer(run).vocab_size
    began = time.perf_counter()
    for meta in sorted((run / "store").glob("*/meta.json")):
        found, problem = examine(meta.parent, json.loads(meta.read_text())["key"], vocab_size)
        if found is None:
            raise RuntimeError(f"{meta.parent}: {problem}")
    took = time.perf_counter() - began
    block = np.random.default_rng(0).bytes(1 << 20)  # the block the check reads
    digest, began = hashlib.sha256(), time.perf_counter()
    for _ in range(256):
        digest.update(block)
    rate = 256 * len(block) / (time.perf_counter() - began) / 1e9
    return {"check_s": round(took, 3), "sha256_gb_s": round(rate, 2)}


def run_size(args, corpus: Path, pairs: int, env: dict) -> dict:
    work = Path(args.work)
    run = work / f"run-{corpus.name}"
    shutil.rmtree(run, ignore_errors=True)
    sets = [
        f'data.corpus="{corpus}"',
        f"train.max_tokens={args.max_tokens}",
        f"train.max_steps={args.steps}",
        "train.log_every=1",
        "train.valid_every=0",
        f"train.checkpoint_every={10 * args.steps}",
        "train.average_last=0",
        "train.threads=" + str(args.threads),
        *args.set,
    ]
    flags = [x for s in sets for x in ("--set", s)]
    aiayn = [sys.executable, "-m", "aiayn.cli"]
    record: dict = {"pairs": pairs, "config": args.config, "max_tokens": args.max_tokens}
    if args.set:
        record["overrides"] = args.set

    code = (
        "import sys; from pathlib import Path; from aiayn.config import load_run_config;"
        "from aiayn.train.tasks import make_task;"
        "run = load_run_config(sys.argv[1], sys.argv[3:]);"
        "Path(sys.argv[2]).mkdir(parents=True, exist_ok=True);"
        "make_task(run).train_tokenizer().save(Path(sys.argv[2]))"
    )
    record["tokenizer"] = timed([sys.executable, "-c", code, args.config, str(run), *sets], env)
    record["encoding"] = timed(
        [*aiayn, "train", args.config, "--out", str(run), "--prepare-only", *flags], env
    )
    store = run / "store"
    tokens = 0
    disk = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    for meta in store.glob("*/meta.json"):
        m = json.loads(meta.read_text())
        width = max(int(f["dtype"][-1]) for f in m["fields"].values())
        tokens += sum(f["tokens"] for f in m["fields"].values()) * width
    record["store"] = {
        "bytes": disk,
        "id_bytes": tokens,
        "ratio": round(disk / max(tokens, 1), 3),
        "examples": sum(json.loads(m.read_text())["examples"] for m in store.glob("*/meta.json")),
        **check_stores(run),
    }
    for ranks in args.ranks:
        out = run if ranks == 1 else work / f"run-{corpus.name}-r{ranks}"
        if ranks > 1:
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(run, out, ignore=shutil.ignore_patterns("checkpoints", "*.jsonl"))
        launcher = aiayn
        if ranks > 1:
            launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
            launcher += [f"--nproc_per_node={ranks}", "-m", "aiayn.cli"]
        metrics = out / "metrics.jsonl"
        metrics.unlink(missing_ok=True)
        cmd = [*launcher, "train", args.config, "--out", str(out), "--quiet", *flags]
        result = timed(cmd, env, watch=metrics)
        result["data_wait_share"] = wait_share(metrics)
        record[f"train_{ranks}"] = result
        if ranks == 1:  # resumed from the last checkpoint for one more step
            skip = len(metrics.read_text().splitlines())
            more = [
                x if x != f"train.max_steps={args.steps}" else f"train.max_steps={args.steps + 1}"
                for x in flags
            ]
            cmd = [*launcher, "train", args.config, "--out", str(out), "--quiet", *more]
            record["resume_1"] = timed(cmd, env, watch=metrics, skip=skip)
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pairs", default="250000,1000000,4500000")
    p.add_argument("--corpus", help="a prepared parallel corpus to measure instead")
    p.add_argument("--config", default="configs/base-wmt.toml")
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--ranks", default="1", help="process counts to train with, e.g. 1,2")
    p.add_argument("--threads", type=int, default=0, help="train.threads (0: torch's default)")
    p.add_argument("--work", default="/tmp/aiayn-scale")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="config overrides"
    )
    args = p.parse_args()
    args.ranks = [int(r) for r in args.ranks.split(",")]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AIAYN_BENCH_TMP": str(work), "PYTHONWARNINGS": "ignore"}
    sizes = [] if args.corpus else [int(n) for n in args.pairs.split(",") if int(n)]
    baseline = None
    if not args.no_baseline:
        corpus = work / f"corpus-{BASELINE_PAIRS}"
        write_corpus(corpus, BASELINE_PAIRS)
        base_args = argparse.Namespace(**{**vars(args), "ranks": [1]})
        baseline = {
            "pairs": BASELINE_PAIRS,
            **run_size(base_args, corpus, BASELINE_PAIRS, env)["train_1"],
        }
        print(json.dumps({"baseline": baseline}), flush=True)
    jobs = [(Path(args.corpus), 0)] if args.corpus else []
    for n in sizes:
        corpus = work / f"corpus-{n}"
        began = time.perf_counter()
        write_corpus(corpus, n)
        print(f"corpus of {n} pairs: {time.perf_counter() - began:.0f} s", flush=True)
        jobs.append((corpus, n))
    for corpus, n in jobs:
        record = run_size(args, corpus, n, env)
        if baseline is not None:
            record["baseline_train"] = baseline
            record["data_rss_mb"] = round(
                record["train_1"]["peak_rss_mb"] - baseline["peak_rss_mb"], 1
            )
        write_result("scale", record)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
