"""Does the layout of a linear weight change the speed of its product? Times ``F.linear`` on
each distinct weight shape of the model (the decoder's projections and the output projection)
with the weight row-major, as ``nn.Linear`` creates it, and column-major, as
``aiayn.model.layout`` lays it out when a model directory loads on a CPU, from a decoding
step's few rows to an encoder batch's thousands. Each pair is timed alternately, CPU time,
one thread.

    python bench/experiments/linear_layout.py [MODEL_DIR] [--rows 1,4,16,64,131,2400]

Prints the speed-up of column-major per shape and row count; appends a record to
bench/results/linear_layout.jsonl.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import write_result  # noqa: E402


def speedup(a, b, calls: int, rounds: int = 5) -> float:
    """CPU time of ``calls`` calls of ``a`` over that of ``b``: medians of ``rounds`` rounds,
    timed alternately (a, b, a, b, ...) after one warm-up round each."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds + 1):
        for fn, spent in zip((a, b), times, strict=True):
            start = time.process_time()
            for _ in range(calls):
                fn()
            spent.append(time.process_time() - start)
    return statistics.median(times[0][1:]) / statistics.median(times[1][1:])


def model_and_rows(default_rows: str) -> tuple[str, list[int]]:
    """The command line's model directory and row counts (``--rows``); one torch thread."""
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--rows", default=default_rows, help="comma-separated row counts")
    args = parser.parse_args()
    torch.set_num_threads(1)
    return args.model_dir, [int(r) for r in args.rows.split(",")]


def main() -> None:
    model_dir, rows = model_and_rows("1,4,16,64,131,2400")
    model = load_model_dir(model_dir)
    shapes = sorted({tuple(m.weight.shape) for m in model.decoder.modules()
                     if isinstance(m, torch.nn.Linear)} | {tuple(model.unembed.weight.shape)})  # fmt: skip
    ratios: dict[str, dict[int, float]] = {}
    with torch.no_grad():
        for out_features, in_features in shapes:
            row_major = torch.randn(out_features, in_features)
            column_major = row_major.t().contiguous().t()
            bias = torch.randn(out_features)
            name = f"{out_features}x{in_features}"
            ratios[name] = {}
            for n in rows:
                x = torch.randn(n, in_features)
                row, column = (partial(F.linear, x, w, bias) for w in (row_major, column_major))
                ratios[name][n] = speedup(row, column, calls=max(10, 3000 // n))
            print(f"{name}: " + ", ".join(f"{n} rows {s:.2f}x" for n, s in ratios[name].items()))
    path = write_result("linear_layout", {"rows": rows, "column_major_speedup": ratios})
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
