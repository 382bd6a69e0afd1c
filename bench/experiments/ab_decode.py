"""Decoding speed of two versions of aiayn, for keeping or dropping a change: each version
runs in its own process (in turn, several rounds), on the same sentences and batches as
bench/decode_speed.py, and reports generated tokens per second of CPU time (steadier than
wall-clock time on a shared machine).

    python bench/experiments/ab_decode.py BEFORE AFTER [--mode greedy|beam|beam-early-stop] [--int8]

BEFORE and AFTER are git revisions of this repository (or directories holding a src/
tree). Appends a record to bench/results/decode_ab.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from common import write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])  # the version's own bench helpers
from decode_speed import generated_tokens, load_test_batches
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_decode
model, batches = load_test_batches({model_dir!r}, {sentences}, {batch})
if {int8}:
    from aiayn.model.quantize import quantize_int8
    quantize_int8(model)
fn = {{
    "greedy": lambda s: greedy_decode(model, s),
    "beam": lambda s: beam_decode(model, s, beam=4),
    "beam-early-stop": lambda s: beam_decode(model, s, beam=4, early_stop=True),
}}[{mode!r}]
fn(batches[0][:2])
rates = []
for _ in range({repeats}):
    start = time.process_time()
    produced = sum(generated_tokens(fn(src)) for src in batches)
    rates.append(produced / (time.process_time() - start))
print(json.dumps(sorted(rates)[len(rates) // 2]))
"""


def source_tree(revision: str, scratch: Path) -> Path:
    """A directory with the src/ and bench/ trees of ``revision`` (a git revision or a
    directory)."""
    if Path(revision, "src").is_dir():
        return Path(revision).resolve()
    out = scratch / revision.replace("/", "_")
    out.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src", "bench"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--mode", default="greedy", choices=["greedy", "beam", "beam-early-stop"])
    parser.add_argument("--int8", action="store_true", help="quantize both models first")
    parser.add_argument("--model-dir", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="processes per version (median)")
    parser.add_argument("--note", default="", help="what the change is, for the record")
    args = parser.parse_args()
    rates = {}
    with tempfile.TemporaryDirectory() as scratch:
        trees = {name: source_tree(name, Path(scratch)) for name in (args.before, args.after)}
        code = CHILD.format(
            model_dir=args.model_dir,
            sentences=args.sentences,
            batch=args.batch,
            int8=args.int8,
            mode=args.mode,
            repeats=3,
        )
        runs = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1"}
                done = subprocess.run(
                    [sys.executable, "-c", code, str(tree / "bench")],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                if done.returncode:
                    sys.exit(f"{name}: {done.stderr[-2000:]}")
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for name, values in runs.items():
        rates[name] = statistics.median(values)
        print(f"{name}: {rates[name]:.0f} tokens per CPU second ({[round(v) for v in values]})")
    ratio = rates[args.after] / rates[args.before]
    print(
        f"{args.after} / {args.before}: {ratio:.3f}x ({args.mode}{', int8' if args.int8 else ''})"
    )
    path = write_result(
        "decode_ab",
        {
            "before": args.before,
            "after": args.after,
            "note": args.note,
            "mode": args.mode,
            "int8": args.int8,
            "sentences": args.sentences,
            "batch": args.batch,
            "tokens_per_cpu_s": rates,
            "runs": runs,
            "ratio": ratio,
            "load_average": os.getloadavg(),
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
