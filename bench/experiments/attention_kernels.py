"""Attention over a decoding step's key/value cache on this CPU: PyTorch's fused kernel
against the same products written other ways, with the cache hot and cold.

    python bench/experiments/attention_kernels.py [--model models/ding-de-en]
        [--shapes 20x30,64x30,131x19,60x41] [--threads 1] [--repeats 5]

A shape ROWSxLENGTH is one query per sentence (a greedy step) against LENGTH cached keys and
values per sentence, with the model's heads and head size. Formulations:

* ``sdpa``: ``F.scaled_dot_product_attention`` on strided (B, H, L, Dh) views of a
  (B, capacity, 2, H, Dh) store, with a padding mask: what aiayn's decoding step runs;
* ``bmm``: scores and outputs by ``torch.bmm`` over head-major keys and values, each stored
  apart as (B * H, capacity, Dh) (CTranslate2's order, with spare capacity), with the mask
  added to the scores;
* ``products``: element-wise products summed (PyTorch's own vectorized loops, no BLAS);
* ``read``: one pass over the same keys and values (``sum``), what
  ``KVCache.stream_in`` costs: the memory's speed, about the least any attention kernel pays
  (it must read them all).

"Hot" repeats a call back to back; "cold" reads a buffer larger than the CPU's caches before
each call, as a decoding step's other layers do between two reads of one cache. Reports
microseconds per call and GB/s of keys and values read; appends a record to
bench/results/attention_kernels.jsonl with the CPU and its flags.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import steady_allocator, write_result  # noqa: E402

from aiayn.modeldir import load_config  # noqa: E402

FLUSH_BYTES = 256 << 20  # larger than any CPU's last-level cache here


def parse_shapes(text: str) -> list[tuple[int, int]]:
    try:
        return [tuple(int(x) for x in s.split("x", 1)) for s in text.split(",")]
    except ValueError:
        raise SystemExit(
            f"--shapes {text!r}: expected ROWSxLENGTH[,ROWSxLENGTH...], e.g. 64x30"
        ) from None


def formulations(rows: int, length: int, heads: int, d_head: int) -> dict:
    """name: a call computing one step's attention (B, H, 1, Dh), each on its own storage."""
    gen = torch.Generator().manual_seed(0)
    capacity = 1 << (length - 1).bit_length()  # the cache grows by doubling
    q = torch.randn(rows, heads, 1, d_head, generator=gen)
    store = torch.randn(rows, capacity, 2, heads, d_head, generator=gen)
    filled = store[:, :length]
    k, v = filled[:, :, 0].transpose(1, 2), filled[:, :, 1].transpose(1, 2)  # (B, H, L, Dh)
    mask = torch.ones(rows, 1, 1, length, dtype=torch.bool)
    mask[1::2, ..., length - length // 4 :] = False  # every other sentence padded
    bias = torch.zeros(rows, 1, length).masked_fill_(~mask.view(rows, 1, length), float("-inf"))
    head_major = torch.empty(2, rows * heads, capacity, d_head)
    head_major[0, :, :length] = k.reshape(rows * heads, length, d_head)
    head_major[1, :, :length] = v.reshape(rows * heads, length, d_head)
    kh, vh = head_major[0, :, :length], head_major[1, :, :length]  # (B*H, L, Dh) views
    scale = d_head**-0.5

    def bmm():
        scores = torch.bmm(q.view(rows * heads, 1, d_head), kh.transpose(1, 2))
        scores = scores.view(rows, heads, length).mul_(scale).add_(bias)
        weights = scores.softmax(-1).view(rows * heads, 1, length)
        return torch.bmm(weights, vh).view(rows, heads, 1, d_head)

    def products():
        scores = (q * k).sum(-1).mul_(scale).add_(bias)  # (B, H, L)
        return (scores.softmax(-1)[..., None] * v).sum(2, keepdim=True)

    return {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "bmm": bmm,
        "products": products,
        "read": lambda: (k.sum(), v.sum()),
    }


def timed(fn, repeats: int, cold: bool, flush: torch.Tensor) -> float:
    """Median seconds per call, hot (calls back to back) or cold (``flush`` read first)."""
    fn()
    calls = 50 if not cold else 10
    times = []
    for _ in range(repeats):
        total = 0.0
        for _ in range(calls):
            if cold:
                flush.sum()  # read, as the weights and other caches are
            start = time.perf_counter()
            fn()
            total += time.perf_counter() - start
        times.append(total / calls)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/ding-de-en")
    parser.add_argument("--shapes", default="20x30,64x30,131x19,60x41")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steady_allocator()  # no page faults for a formulation's temporaries, whatever ran before
    config = load_config(Path(args.model))
    heads, d_head = config.n_heads, config.d_model // config.n_heads
    flush = torch.zeros(FLUSH_BYTES // 4)
    rows = []
    for n, length in parse_shapes(args.shapes):
        calls = formulations(n, length, heads, d_head)
        reference = calls["sdpa"]()
        for name in ("bmm", "products"):
            torch.testing.assert_close(calls[name](), reference)  # the same attention
        kv_bytes = 2 * n * length * heads * d_head * 4
        for name, fn in calls.items():
            hot = timed(fn, args.repeats, False, flush)
            cold = timed(fn, args.repeats, True, flush)
            rows.append({
                "rows": n, "length": length, "kernel": name, "hot_us": hot * 1e6,
                "cold_us": cold * 1e6, "cold_gb_s": kv_bytes / cold / 1e9,
            })  # fmt: skip
            print(
                f"{n:>4} x {length:<3} {name:<9} hot {hot * 1e6:8.1f} us   cold {cold * 1e6:8.1f}"
                f" us   {kv_bytes / cold / 1e9:5.1f} GB/s",
                flush=True,
            )
    record = {
        "model": args.model,
        "heads": heads,
        "d_head": d_head,
        "threads": args.threads,
        "repeats": args.repeats,
        "rows": rows,
    }
    print(f"appended to {write_result('attention_kernels', record)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
