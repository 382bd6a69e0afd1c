"""Peak memory and step time of a training process under glibc's heap policies, for choosing
``train.trim_heap_every`` (aiayn.train.heap).

    python bench/experiments/heap_memory.py RUN [--steps 5] [--repeats 2]

RUN is a run directory whose tokenizer and token store are written (``aiayn train CONFIG
--out RUN --prepare-only``, or bench/scale.py's run-corpus-N in its --work directory); its
run.json gives the config. Each variant trains --steps steps of the base model from scratch
(4,000-token batches, activation checkpointing on) in a fresh process under ``/usr/bin/time
-v``; the variants take turns, --repeats rounds. Records each run's peak RSS and seconds per
step (steps 2 to the last, from metrics.jsonl; step 1 also allocates Adam's state) in
bench/results/heap_memory.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from common import ROOT, write_result  # noqa: E402
from scale import timed  # noqa: E402

VARIANTS = {
    "glibc default": ({}, []),
    "trim every 1 s": ({}, ["train.trim_heap_every=1"]),
    "trim every 0.3 s": ({}, ["train.trim_heap_every=0.3"]),
    "mmap threshold 4 MB": ({"MALLOC_MMAP_THRESHOLD_": "4194304"}, []),
}


def train_once(run: Path, steps: int, env: dict, sets: list[str], work: Path) -> dict:
    out = work / "run"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in ("tokenizer.model", "tokenizer.json", "run.json"):
        if (run / name).is_file():
            shutil.copy(run / name, out / name)
    (out / "store").symlink_to((run / "store").resolve())
    config = json.loads((run / "run.json").read_text())
    overrides = [
        f'data.corpus="{config["data"]["corpus"]}"',
        "train.max_tokens=4000",
        f"train.max_steps={steps}",
        "train.log_every=1",
        "train.valid_every=0",
        f"train.checkpoint_every={10 * steps}",
        "train.average_last=0",
        "train.activation_checkpointing=true",
        *sets,
    ]
    cmd = [sys.executable, "-m", "aiayn.cli", "train", str(ROOT / "configs/base-wmt.toml")]
    cmd += ["--out", str(out), "--quiet", *[x for s in overrides for x in ("--set", s)]]
    timing = timed(cmd, {**os.environ, **env, "AIAYN_BENCH_TMP": str(work)})
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    elapsed = [r["elapsed_s"] for r in lines if "loss" in r and "elapsed_s" in r]
    precision = next((r["precision"] for r in lines if r.get("event") == "precision"), None)
    return {
        "peak_rss_mb": timing["peak_rss_mb"],
        "step_s": round((elapsed[-1] - elapsed[0]) / (len(elapsed) - 1), 3),
        "precision": precision,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run", type=Path)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names")
    args = p.parse_args()
    chosen = [v.strip() for v in args.variants.split(",")]
    runs: dict[str, list[dict]] = {v: [] for v in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for name in chosen:
                env, sets = VARIANTS[name]
                result = train_once(args.run, args.steps, env, sets, Path(tmp))
                runs[name].append(result)
                print(json.dumps({"variant": name, **result}), flush=True)
    pairs = json.loads((args.run / "store" / "train" / "meta.json").read_text())["examples"]
    for name, results in runs.items():
        env, sets = VARIANTS[name]
        write_result(
            "heap_memory",
            {
                "variant": name,
                "env": env,
                "overrides": sets,
                "pairs": pairs,
                "steps": args.steps,
                "runs": results,
            },
        )


if __name__ == "__main__":
    main()
