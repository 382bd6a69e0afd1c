"""How much of throughput-mode decoding is PyTorch eager mode's floor: the share of its time
that the framework costs whatever the model's size, and so the most that any rewrite of the
decoding step in PyTorch operators (fewer modules, fewer operators) could save.

    python bench/experiments/eager_floor.py [MODEL_DIR] [--repeats 3]

Runs ``bench/decode_speed.py``'s throughput mode (the 200 test sentences at once, in
length-sorted batches of 2,500 tokens, greedy) in float32 and int8, and records how many
rows each decoding step runs through the decoder (finished sentences that have not left the
batch yet included: only the projection to the vocabulary skips them). It then times one step of the same architecture with
d_model 16 and a 100-token vocabulary (``step_cost.py``'s framework-overhead row) at a few
row counts, and sums, over the real run's steps, that floor at each step's rows
(interpolated). The floor's share of the run bounds what removing framework overhead could
give: ``1 / (1 - share)`` at most, and less, since the floor also holds kernel-side costs (an
attention call's loop over sentences and heads, allocation) that any PyTorch step keeps.

One thread, CPU time; appends a record to bench/results/eager_floor.jsonl.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from step_cost import aiayn_steps, per_step  # noqa: E402

from aiayn.model import build_model  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import steady_allocator, write_result  # noqa: E402
from decode_speed import load_test_set, throughput_greedy  # noqa: E402

MAX_TOKENS = 2500  # decode_speed.py's throughput batches
FLOOR_ROWS = (1, 4, 16, 32, 64, 96, 128, 192)


def steps_rows(model, batches) -> list[int]:
    """The rows each decoding step of one throughput-mode run takes through the decoder."""
    rows = []
    decode = model.decode

    def counted(tgt, *args, **kwargs):
        rows.append(tgt.size(0))  # (rows, 1): one new token per row
        return decode(tgt, *args, **kwargs)

    model.decode = counted
    try:
        throughput_greedy(model, batches, MAX_TOKENS)
    finally:
        model.decode = decode
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    steady_allocator()
    torch.set_num_threads(1)
    model, _, batches, _ = load_test_set(args.model_dir, 200, 50)
    small = build_model(model.config.replace(d_model=16, d_ff=16, vocab_size=100)).eval()
    # a test sentence's length; its ids folded into the small vocabulary, past the specials
    first = [t for t in batches[0][0].tolist() if t != model.config.pad_id]
    src = torch.tensor([[4 + t % 96 for t in first]])  # (1, S)
    floor_ms = []
    for n in FLOOR_ROWS:
        rows = src.expand(n, -1)  # (n, S)
        floor_ms.append(per_step(lambda k, s=rows: aiayn_steps(small, s, k), args.repeats))
    runs = {}
    for name, m in (
        ("float32", model),
        ("int8", load_model_dir(args.model_dir, quantize="int8")),
    ):
        throughput_greedy(m, batches, MAX_TOKENS)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.process_time()
            throughput_greedy(m, batches, MAX_TOKENS)
            times.append(time.process_time() - start)
        rows = steps_rows(m, batches)
        # beyond the largest row count timed, the floor grows as between the last two
        slope = (floor_ms[-1] - floor_ms[-2]) / (FLOOR_ROWS[-1] - FLOOR_ROWS[-2])
        floor = sum(
            float(np.interp(r, FLOOR_ROWS, floor_ms)) + max(0, r - FLOOR_ROWS[-1]) * slope
            for r in rows
        )
        run_ms = statistics.median(times) * 1e3
        share = floor / run_ms
        runs[name] = {
            "run_cpu_ms": round(run_ms, 1),
            "steps": len(rows),
            "mean_rows_per_step": round(statistics.fmean(rows), 1),
            "floor_ms": round(floor, 1),
            "floor_share": round(share, 3),
            "most_without_the_floor": round(1 / (1 - share), 3),
        }
        print(name, runs[name], flush=True)
    write_result(
        "eager_floor",
        {
            "model_dir": args.model_dir,
            "repeats": args.repeats,
            "max_tokens": MAX_TOKENS,
            "floor_cpu_ms_per_step": {
                str(n): round(ms, 3) for n, ms in zip(FLOOR_ROWS, floor_ms, strict=True)
            },
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
