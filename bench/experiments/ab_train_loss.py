"""Training-step time with two versions of the loss module, for keeping or dropping a change.

    python bench/experiments/ab_train_loss.py BEFORE [--preset small] [--rounds 9] [--batches 4]

BEFORE is a git revision of this repository: its ``src/aiayn/train/objectives.py`` is loaded
beside the working tree's. Two copies of the same model (same seed) train on the same Ding
batches (as in bench/train_speed.py: label smoothing 0.1, Adam 0.9/0.98, 2 threads), one with
each loss, timed alternately in one process (the order swapped every round, so drift on a
shared machine hits both alike). Prints the ratio after/before of each round and their median,
and appends a record to bench/results/train_loss_ab.jsonl.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
import aiayn.train.objectives as after  # noqa: E402
from aiayn.config import ModelConfig  # noqa: E402
from aiayn.data.tokenizer import PAD  # noqa: E402
from aiayn.model import build_model  # noqa: E402
from common import write_result  # noqa: E402
from train_speed import MAX_TOKENS, VOCAB, ding_batches  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def objectives_at(revision: str):
    """The loss module of ``revision``, imported under its own name."""
    source = subprocess.run(
        ["git", "show", f"{revision}:src/aiayn/train/objectives.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "objectives_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("objectives_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", help="git revision whose loss module is the baseline")
    parser.add_argument("--preset", default="small", choices=sorted(VOCAB))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batches", type=int, default=4, help="training steps per timing")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = ModelConfig.preset(args.preset, vocab_size=VOCAB[args.preset])
    batches = ding_batches(MAX_TOKENS[args.preset], args.batches)
    runs = {}
    for name, module in (("before", objectives_at(args.before)), ("after", after)):
        torch.manual_seed(0)
        model = build_model(config).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

        def run(model=model, opt=opt, module=module):
            for b in batches:
                loss, _, n = module.seq2seq_loss(model, b, 0.1, PAD)
                (loss / n).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

        run()  # warm-up
        runs[name] = run
    times = {name: [] for name in runs}
    for i in range(args.rounds):
        for name in list(runs) if i % 2 == 0 else list(runs)[::-1]:
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    step = {name: statistics.median(t) / len(batches) for name, t in times.items()}
    print(f"{args.preset}: step {step['before']:.3f} s before, {step['after']:.3f} s after")
    print(f"after/before time per round: {[round(r, 3) for r in ratios]}")
    print(f"median {statistics.median(ratios):.3f}")
    write_result(
        "train_loss_ab",
        {"before": args.before, "preset": args.preset, "batches": len(batches),
         "step_s": step, "ratios": ratios, "median_ratio": statistics.median(ratios)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
