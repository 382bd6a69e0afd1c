"""Where greedy or beam decoding spends its time: the operators that cost most, and how fast
the matrix products run inside decoding against the same shapes timed alone (weights hot in
cache).

    python bench/profile_decode.py [MODEL_DIR] [--beam 1] [--sentences 200] [--threads 1]

Uses the test split and batches of bench/decode_speed.py; prints a table and appends a
record to bench/results/profile_decode.jsonl.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from torch.profiler import profile

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.infer.beam import beam_decode  # noqa: E402
from aiayn.infer.greedy import greedy_decode  # noqa: E402
from common import median_time, write_result  # noqa: E402
from decode_speed import load_test_batches  # noqa: E402

GEMMS = {"aten::addmm": (1, 2), "aten::mm": (0, 1)}  # operator: positions of its (M,K), (K,N)


def gemm_flops(name: str, shapes: list) -> int:
    a, b = (shapes[i] for i in GEMMS[name])
    return 2 * math.prod(a) * b[-1]


def alone_seconds(name: str, shapes: list) -> float:
    """Time of one such product with its operands hot in cache (median of 50)."""
    a, b = (torch.randn(*shapes[i]) for i in GEMMS[name])
    bias = torch.randn(*shapes[0]) if name == "aten::addmm" else None
    fn = (lambda: torch.addmm(bias, a, b)) if bias is not None else (lambda: torch.mm(a, b))
    for _ in range(5):
        fn()
    return median_time(lambda: [fn() for _ in range(10)], repeats=5) / 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--beam", type=int, default=1, help="1: greedy")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, batches = load_test_batches(args.model_dir, args.sentences, args.batch)
    model.eval()

    def decode_all():
        for src in batches:
            if args.beam == 1:
                greedy_decode(model, src)
            else:
                beam_decode(model, src, beam=args.beam)

    decode_all()  # warm-up
    start = time.perf_counter()
    with profile(record_shapes=True) as prof:
        decode_all()
    wall = time.perf_counter() - start
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e6
    print(f"decoding under the profiler: {wall:.2f} s ({total:.2f} s of operator time)")
    top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:10]
    print(f"{'operator':<50} {'share':>6} {'calls':>6}")
    for e in top:
        print(f"{e.key:<50} {e.self_cpu_time_total / 1e6 / total:>6.1%} {e.count:>6}")

    flops = inside = alone = 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key not in GEMMS or not e.input_shapes:
            continue
        flops += gemm_flops(e.key, e.input_shapes) * e.count
        inside += e.self_cpu_time_total / 1e6
        alone += alone_seconds(e.key, e.input_shapes) * e.count
    rates = {"inside decoding": flops / inside / 1e9, "alone, hot": flops / alone / 1e9}
    print(
        f"matrix products: {inside / total:.0%} of operator time; "
        f"{rates['inside decoding']:.1f} GFLOP/s inside decoding, "
        f"{rates['alone, hot']:.1f} GFLOP/s for the same shapes alone"
    )
    path = write_result(
        "profile_decode",
        {
            "model_dir": args.model_dir,
            "beam": args.beam,
            "sentences": args.sentences,
            "batch": args.batch,
            "threads": args.threads,
            "gemm_share": inside / total,
            "gemm_gflops": rates,
            "top_ops": {e.key: e.self_cpu_time_total / 1e6 / total for e in top},
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
