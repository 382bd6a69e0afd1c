"""Does torch.compile pay for a decoder step on CPU? Times one position-wise feed-forward block
of the shipped model (Linear, ReLU, Linear) at a decoding batch size, eager against
torch.compile (max-autotune with frozen weights: Inductor picks between its own C++ GEMM
micro-kernels and MKL by timing them), one thread.

    python bench/experiments/compile_block.py [MODEL_DIR] [--rows 20]

Prints both times, the compile time and the largest difference; appends a record to
bench/results/compile_block.jsonl.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import write_result  # noqa: E402


def cpu_microseconds(fn, n: int = 300) -> float:
    for _ in range(20):
        fn()
    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - start) / n * 1e6)
    return sorted(runs)[2]


def main() -> None:
    import torch._inductor.config as inductor

    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--rows", type=int, default=20, help="batch rows of a decoding step")
    args = parser.parse_args()
    torch.set_num_threads(1)
    inductor.freezing = True
    block = load_model_dir(args.model_dir).decoder.layers[0].ffn
    x = torch.randn(args.rows, block.linear1.in_features)
    with torch.no_grad():
        eager = cpu_microseconds(lambda: block(x))
        start = time.perf_counter()
        compiled = torch.compile(block, mode="max-autotune", dynamic=False)
        compiled(x)
        compile_s = time.perf_counter() - start
        fast = cpu_microseconds(lambda: compiled(x))
        diff = (compiled(x) - block(x)).abs().max().item() / block(x).abs().max().item()
    print(
        f"eager {eager:.0f} us, compiled {fast:.0f} us ({eager / fast:.2f}x); "
        f"compile {compile_s:.0f} s; max |diff| {diff:.1e} of scale"
    )
    path = write_result(
        "compile_block",
        {
            "rows": args.rows,
            "eager_us": eager,
            "compiled_us": fast,
            "speedup": eager / fast,
            "compile_s": compile_s,
            "max_scaled_diff": diff,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
