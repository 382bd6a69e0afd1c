"""The main job's training at float32 against bf16 (CPU autocast): steps in the same minutes,
validation loss, and test BLEU / chrF of the model each trains.

    python bench/train_precision.py [--config configs/demo-de-en.toml] [--runs 2]
        [--precisions fp32,bf16] [--root runs/precision]

Runs ``aiayn train CONFIG`` (its ``train.max_minutes``: 15 for the demo) at each precision in
turn, ``--runs`` times (fp32, bf16, fp32, bf16: alternated, so a drift of the host is shared),
each in a fresh process with ``train.precision`` set, then translates the corpus's test split
greedily (as ``aiayn evaluate`` does) and scores it with sacreBLEU. A run directory already
finished is scored again rather than retrained, so the series resumes after an interruption.
Appends one record per run to bench/results/train_precision.jsonl (``series``: the time the
series began), with the CPU's flags.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_result  # noqa: E402

import aiayn  # noqa: E402
from aiayn.config import load_run_config  # noqa: E402
from aiayn.evaluate import bleu_chrf  # noqa: E402


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def finished(run: Path) -> dict | None:
    """The summary a finished run wrote (metrics.jsonl's last record with ``train_minutes``)."""
    metrics = run / "metrics.jsonl"
    if not (run / "model" / "model.safetensors").is_file() or not metrics.is_file():
        return None
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    summary = [r for r in records if "train_minutes" in r]
    return {**summary[-1], "records": records} if summary else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/demo-de-en.toml")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--root", default="runs/precision")
    parser.add_argument("--set", action="append", default=[], help="passed to aiayn train")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    corpus = Path(load_run_config(args.config).data.corpus)
    sources, references = lines(corpus / "test.de.gz"), lines(corpus / "test.en.gz")
    aiayn_cli = Path(sys.executable).parent / "aiayn"
    series = time.strftime("%Y-%m-%dT%H:%M:%S")
    for i in range(1, args.runs + 1):
        for precision in args.precisions.split(","):
            run = Path(args.root) / f"{precision}-{i}"
            if finished(run) is None:
                sets = [f"train.precision={precision}", *args.set]
                command = [str(aiayn_cli), "train", args.config, "--out", str(run), "--quiet"]
                for s in sets:
                    command += ["--set", s]
                print(" ".join(command), flush=True)
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            summary = finished(run)
            if summary is None:
                raise SystemExit(f"{run}: the run did not finish")
            speeds = [r["tokens_per_s"] for r in summary["records"] if "tokens_per_s" in r]
            translator = aiayn.load(run / "model")
            hypotheses = [t.text for t in translator.translate(sources)]
            row = {
                "precision": precision,
                "run": i,
                "steps": summary["step"],
                "train_minutes": round(summary["train_minutes"], 2),
                "valid_loss": summary["valid_loss"],
                "tokens_per_s": round(sum(speeds[1:]) / max(len(speeds) - 1, 1), 1),
                "run_json_precision": json.loads((run / "run.json").read_text())
                .get("train", {})
                .get("precision"),
                **bleu_chrf(hypotheses, references),
            }
            print(row, flush=True)
            write_result(
                "train_precision",
                {"series": series, "config": args.config, "sets": args.set, "note": args.note,
                 "row": row},
            )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
