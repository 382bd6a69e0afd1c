"""Decoding speed of two versions of aiayn, for keeping or dropping a change: each version
runs in its own process (in turn, several rounds), on the same sentences and batches as
bench/decode_speed.py, and reports generated tokens per second of CPU time (steadier than
wall-clock time on a shared machine).

    python bench/experiments/ab_decode.py BEFORE AFTER [--mode greedy|beam|beam-early-stop|throughput] [--int8]
    python bench/experiments/ab_decode.py BEFORE AFTER --mode step [--rows 1,4]

BEFORE and AFTER are git revisions of this repository (or directories holding a src/
tree). ``--mode step`` times one KV-cached greedy step instead, on ROWS copies of one test
sentence, as bench/experiments/step_cost.py does (the CPU time of 50 steps less that of 10,
over 40), and reports steps per CPU second for each row count. Appends a record to
bench/results/decode_ab.jsonl.
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
from decode_speed import generated_tokens, load_test_batches, throughput_greedy
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
    "throughput": lambda s: throughput_greedy(model, s, 2500),
}}[{mode!r}]
whole = {mode!r} == "throughput"  # all sentences in one call, batched by tokens
fn([batches[0][:2]] if whole else batches[0][:2])
rates = []
for _ in range({repeats}):
    start = time.process_time()
    outs = [fn(batches)] if whole else [fn(src) for src in batches]
    produced = sum(generated_tokens(out) for out in outs)
    rates.append(produced / (time.process_time() - start))
print(json.dumps(sorted(rates)[len(rates) // 2]))
"""

STEP_CHILD = """
import json, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
from decode_speed import load_test_batches
model, batches = load_test_batches({model_dir!r}, 1, 1)
if {int8}:
    from aiayn.model.quantize import quantize_int8
    quantize_int8(model)
sentence = [t for t in batches[0][0].tolist() if t != model.config.pad_id]

@torch.no_grad()
def steps(src, k):
    memory, src_mask = model.encode(src)
    state = model.new_state(src_mask)
    token = torch.full((src.size(0), 1), model.config.bos_id, dtype=torch.long)
    for _ in range(k):
        token = model.decode(token, memory, state=state)[:, -1].max(-1)[1][:, None]

def cpu(src, k):
    start = time.process_time()
    steps(src, k)
    return time.process_time() - start

rates = {{}}
for rows in {rows}:
    src = torch.tensor([sentence] * rows)
    steps(src, 10)
    per_step = sorted((cpu(src, 50) - cpu(src, 10)) / 40 for _ in range({repeats}))
    rates[rows] = 1 / per_step[len(per_step) // 2]
print(json.dumps(rates))
"""


def named(revision: str) -> str:
    """A revision as the record names it: its short commit hash (``HEAD~1`` would name
    nothing later), or a directory as given."""
    if Path(revision, "src").is_dir():
        return revision
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", revision],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


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
    parser.add_argument(
        "--mode",
        default="greedy",
        choices=["greedy", "beam", "beam-early-stop", "throughput", "step"],
    )
    parser.add_argument("--rows", default="1,4", help="--mode step: comma-separated batch sizes")
    parser.add_argument("--int8", action="store_true", help="quantize both models first")
    parser.add_argument("--model-dir", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="processes per version (median)")
    parser.add_argument("--note", default="", help="what the change is, for the record")
    parser.add_argument(
        "--not-kept", action="store_true", help="record the change as measured and dropped"
    )
    args = parser.parse_args()
    rates = {}
    with tempfile.TemporaryDirectory() as scratch:
        trees = {name: source_tree(name, Path(scratch)) for name in (args.before, args.after)}
        if args.mode == "step":
            rows = [int(r) for r in args.rows.split(",")]
            code = STEP_CHILD.format(model_dir=args.model_dir, rows=rows, repeats=5, int8=args.int8)
        else:
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
    if args.mode == "step":  # steps per CPU second, by rows
        for name, values in runs.items():
            rates[name] = {n: statistics.median(v[n] for v in values) for n in values[0]}
            print(f"{name}: CPU ms per step " + ", ".join(
                f"{n} rows {1e3 / r:.3f}" for n, r in rates[name].items()
            ))  # fmt: skip
        ratio = {n: rates[args.after][n] / rates[args.before][n] for n in rates[args.after]}
        print(f"{args.after} / {args.before}: " + ", ".join(
            f"{n} rows {r:.3f}x" for n, r in ratio.items()
        ))  # fmt: skip
    else:
        for name, values in runs.items():
            rates[name] = statistics.median(values)
            print(f"{name}: {rates[name]:.0f} tokens per CPU second ({[round(v) for v in values]})")
        ratio = rates[args.after] / rates[args.before]
        kind = f"{args.mode}{', int8' if args.int8 else ''}"
        print(f"{args.after} / {args.before}: {ratio:.3f}x ({kind})")
    path = write_result(
        "decode_ab",
        {
            "before": named(args.before),
            "after": named(args.after),
            "note": args.note,
            "kept": not args.not_kept,
            "mode": args.mode,
            "int8": args.int8,
            "sentences": args.sentences,
            "batch": args.batch,
            **({"rows": args.rows, "steps_per_cpu_s": rates} if args.mode == "step" else {}),
            **({} if args.mode == "step" else {"tokens_per_cpu_s": rates}),
            "runs": runs,
            "ratio": ratio,
            "load_average": os.getloadavg(),
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
