"""Training-step time at float32 and at bf16 CPU autocast, with attention in bf16 (autocast's
own rule) or in float32 on the bf16 projections (``aiayn.model.attention.CPU_AUTOCAST_FLOAT32``).

    python bench/experiments/bf16_attention.py [--preset small] [--rounds 7] [--batches 4]

One model (the preset, random weights, dropout 0.1) trains on the same Ding batches as in
bench/train_speed.py (label smoothing 0.1, Adam 0.9/0.98, 2 threads) under each variant in
turn, the order rotated every round so that drift on a shared machine hits all alike; the
weights are restored before every timing. Prints target tokens per second of each variant
(median of the rounds) and its speed-up over float32, and appends a record to
bench/results/bf16_attention.jsonl.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
import aiayn.model.attention as attention  # noqa: E402
from aiayn.config import ModelConfig  # noqa: E402
from aiayn.model import build_model  # noqa: E402
from common import write_result  # noqa: E402
from train_speed import MAX_TOKENS, VOCAB, ding_batches, step_fn  # noqa: E402

VARIANTS = {  # name: (autocast to bf16, attention in float32 under autocast)
    "float32": (False, True),
    "bf16, attention bf16": (True, False),
    "bf16, attention float32": (True, True),
}


def timed(model, batches, state, bf16: bool, float32_attention: bool) -> float:
    """Target tokens per second of len(batches) optimizer steps from the weights ``state``."""
    model.load_state_dict(state)
    run = step_fn(model, batches)
    attention.CPU_AUTOCAST_FLOAT32 = float32_attention
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()
    try:
        with autocast:
            start = time.perf_counter()
            tokens = run()
            return tokens / (time.perf_counter() - start)
    finally:
        attention.CPU_AUTOCAST_FLOAT32 = True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="small", choices=sorted(VOCAB))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=4, help="training steps per timing")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = ModelConfig.preset(args.preset, vocab_size=VOCAB[args.preset], dropout=0.1)
    model = build_model(config).train()
    state = copy.deepcopy(model.state_dict())
    batches = ding_batches(MAX_TOKENS[args.preset], args.batches)
    names = list(VARIANTS)
    for name in names:  # warm-up: kernels chosen, memory allocated
        timed(model, batches[:1], state, *VARIANTS[name])
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rates[name].append(timed(model, batches, state, *VARIANTS[name]))
    median = {name: statistics.median(v) for name, v in rates.items()}
    for name in names:
        print(f"{name:<26} {median[name]:>8,.0f} tokens/s  {median[name] / median['float32']:.2f}x")
    path = write_result(
        "bf16_attention",
        {
            "preset": args.preset,
            "rounds": args.rounds,
            "batches": args.batches,
            "threads": args.threads,
            "tokens_per_s": {name: round(v) for name, v in median.items()},
            "speedup_over_float32": {
                name: round(v / median["float32"], 3) for name, v in median.items()
            },
            "rounds_tokens_per_s": {name: [round(x) for x in v] for name, v in rates.items()},
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
