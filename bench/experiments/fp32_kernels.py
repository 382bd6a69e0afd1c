"""Float32 linear products on this CPU: PyTorch's default (MKL, through ``F.linear``, with the
weight laid out as the model lays it out for decoding) against oneDNN with the weight
prepacked (``torch.ops.mkldnn._reorder_linear_weight`` + ``_linear_pointwise``, what
PyTorch's own CPU freezing uses), at the rows a decoding step and an encoder pass multiply.

    python bench/experiments/fp32_kernels.py [--model models/ding-de-en] [--rows 1,4,16,64,256]
        [--threads 1] [--repeats 5]

Shapes are the model's: the fused q/k/v projection, the output projection, the two
feed-forward products and the projection to the vocabulary. Prints GFLOP/s per engine and
their ratio, appends a record to bench/results/fp32_kernels.jsonl with the CPU and its flags.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import write_result  # noqa: E402

from aiayn.modeldir import load_config  # noqa: E402


def timed(fn, repeats: int, budget: float = 0.2) -> float:
    """Median seconds per call of ``fn`` (each repeat calls it for about ``budget`` s)."""
    fn()
    calls = 1
    start = time.perf_counter()
    while time.perf_counter() - start < budget / 4:
        fn()
        calls += 1
    per = max(int(calls * 4), 1)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(per):
            fn()
        times.append((time.perf_counter() - start) / per)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/ding-de-en")
    parser.add_argument("--rows", default="1,4,16,64,256")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(Path(args.model))
    d, ff, vocab = config.d_model, config.d_ff, config.vocab_size
    shapes = {"qkv": (d, 3 * d), "out": (d, d), "ff1": (d, ff), "ff2": (ff, d), "vocab": (d, vocab)}
    rows_list = [int(r) for r in args.rows.split(",")]
    results = []
    with torch.no_grad():
        for name, (k, n) in shapes.items():
            weight = torch.randn(n, k) / k**0.5
            column_major = weight.t().contiguous().t()  # the decoding layout (model/layout.py)
            bias = torch.randn(n)
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
            for rows in rows_list:
                x = torch.randn(rows, k)
                flops = 2 * rows * k * n
                mkl = timed(partial(F.linear, x, column_major, bias), args.repeats)
                pointwise = torch.ops.mkldnn._linear_pointwise
                onednn = timed(partial(pointwise, x, packed, bias, "none", [], ""), args.repeats)
                row = {
                    "shape": name, "k": k, "n": n, "rows": rows,
                    "mkl_gflops": round(flops / mkl / 1e9, 1),
                    "onednn_gflops": round(flops / onednn / 1e9, 1),
                    "onednn_speedup": round(mkl / onednn, 2),
                }  # fmt: skip
                print(row, flush=True)
                results.append(row)
    write_result(
        "fp32_kernels",
        {"model": args.model, "threads": args.threads, "repeats": args.repeats, "rows": results},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
