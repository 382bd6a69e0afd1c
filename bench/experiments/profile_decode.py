"""Where greedy or beam decoding spends its time: the operators that cost most, and how fast
the matrix products run inside decoding against the same shapes timed alone (weights hot in
cache).

    python bench/experiments/profile_decode.py [MODEL_DIR] [--beam 1] [--sentences 200] [--threads 1]
        [--int8] [--ct2]

``--int8`` profiles the int8 model; ``--ct2`` also times CTranslate2 (which has no operator
profile in its Python package) on the same batches, whole and encoder plus one step, so that
its decoder's time per generated token stands beside aiayn's matrix products alone.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from aiayn.infer.beam import beam_decode  # noqa: E402
from aiayn.infer.greedy import greedy_decode  # noqa: E402
from common import median_time, write_result  # noqa: E402
from decode_speed import generated_tokens, load_test_set  # noqa: E402

GEMMS = {"aten::addmm": (1, 2), "aten::mm": (0, 1)}  # operator: positions of its (M,K), (K,N)
INT8_GEMM = "quantized::linear_dynamic"


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


def ct2_times(args, batches, tokenizer) -> dict:
    """CTranslate2's CPU ms per 1,000 generated tokens: whole, and decoder alone (whole
    minus encoder and first step, from a run capped at one step)."""
    import ct2_peer
    from decode_speed import CT2

    kind = "int8" if args.int8 else "float32"
    path = ct2_peer.build(Path(args.model_dir), Path("bench/.ct2"))[kind]
    translator = CT2(path, kind, args.threads, tokenizer)
    beam = args.beam

    def run(limit=None):
        produced = 0
        start = time.process_time()
        for src in batches:
            if limit is None:
                produced += generated_tokens(translator(src, beam))
            else:
                pieces = [[tokenizer.sp.id_to_piece(t) for t in row if t] for row in src.tolist()]
                translator.translator.translate_batch(
                    pieces, beam_size=beam, max_decoding_length=limit, min_decoding_length=0
                )
        return time.process_time() - start, produced

    run()  # warm-up
    whole, produced = run()
    first, _ = run(limit=1)
    return {
        f"CTranslate2 {kind}, whole": whole / produced * 1e6,
        f"CTranslate2 {kind}, decoder after the first step": (whole - first) / produced * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--beam", type=int, default=1, help="1: greedy")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--int8", action="store_true", help="profile the int8 model")
    parser.add_argument("--ct2", action="store_true", help="time CTranslate2 beside it")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer, batches, _ = load_test_set(args.model_dir, args.sentences, args.batch)
    if args.int8:
        from aiayn.model.quantize import quantize_int8

        quantize_int8(model)
    model.eval()

    def decode_all():
        produced = 0
        for src in batches:
            if args.beam == 1:
                produced += generated_tokens(greedy_decode(model, src))
            else:
                produced += generated_tokens(beam_decode(model, src, beam=args.beam))
        return produced

    produced = decode_all()  # warm-up
    cpu = time.process_time()
    decode_all()
    cpu = time.process_time() - cpu
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

    int8 = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key == INT8_GEMM) / 1e6
    flops = inside = alone = 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key not in GEMMS or not e.input_shapes:
            continue
        flops += gemm_flops(e.key, e.input_shapes) * e.count
        inside += e.self_cpu_time_total / 1e6
        alone += alone_seconds(e.key, e.input_shapes) * e.count
    rates = None
    if inside:  # float32 products (an int8 model has none but the last, kept-float layers')
        rates = {"inside decoding": flops / inside / 1e9, "alone, hot": flops / alone / 1e9}
        print(
            f"float32 matrix products: {inside / total:.0%} of operator time; "
            f"{rates['inside decoding']:.1f} GFLOP/s inside decoding, "
            f"{rates['alone, hot']:.1f} GFLOP/s for the same shapes alone"
        )
    if int8:
        print(f"int8 matrix products: {int8 / total:.0%} of operator time")
    with torch.no_grad():
        encoder = time.process_time()
        for src in batches:
            model.encode(src)
        encoder = time.process_time() - encoder
    per_k = {
        "aiayn, whole (CPU time)": cpu / produced * 1e6,
        "aiayn, decoder (whole minus the encoder)": (cpu - encoder) / produced * 1e6,
    }
    gemm_s = inside + int8
    per_k["aiayn, its matrix products (encoder and decoder)"] = (
        gemm_s / total * cpu / produced * 1e6
    )
    if args.ct2:
        per_k.update(ct2_times(args, batches, tokenizer))
    print(f"CPU ms per 1,000 generated tokens ({produced} tokens):")
    for name, ms in per_k.items():
        print(f"  {name:<50} {ms:8.1f}")
    path = write_result(
        "profile_decode",
        {
            "model_dir": args.model_dir,
            "beam": args.beam,
            "sentences": args.sentences,
            "batch": args.batch,
            "threads": args.threads,
            "gemm_share": inside / total,
            "int8_gemm_share": int8 / total,
            "gemm_gflops": rates,
            "top_ops": {e.key: e.self_cpu_time_total / 1e6 / total for e in top},
            "int8": args.int8,
            "cpu_ms_per_1000_tokens": per_k,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
