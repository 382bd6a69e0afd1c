"""bfloat16 inference on the CPU: what oneDNN's bf16 products give to decoding, against
CTranslate2's ``compute_type="bfloat16"``, and whether BLEU holds.

    python bench/experiments/bf16_decode.py [MODEL_DIR] [--sentences 500] [--threads 1]

Greedy decoding in throughput mode (aiayn translate()'s batching: sorted by length, batches
filled by --max-tokens source tokens) of the model's test split, every decoder timed in turn
in one process (median of --repeats after a warm-up), as bench/decode_speed.py does:

* aiayn float32 (the model as ``load_model_dir`` gives it);
* aiayn bf16 weights: the weights in plain layers cast to bfloat16 (``model.to(torch.bfloat16)``);
* aiayn bf16 autocast: the float32 model under ``torch.autocast("cpu", torch.bfloat16)``;
* CTranslate2 float32 and, where its CPU backend offers it, bfloat16, on the same converted
  model (``ctranslate2.get_supported_compute_types("cpu")`` is recorded).

Reports generated tokens per CPU second and BLEU (sacreBLEU);
appends to bench/results/bf16_decode.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
import ct2_peer  # noqa: E402
from aiayn import build_model  # noqa: E402
from aiayn.data.batching import pad  # noqa: E402
from aiayn.data.tokenizer import PAD  # noqa: E402
from common import steady_allocator, write_result  # noqa: E402
from decode_speed import (  # noqa: E402
    CT2,
    THROUGHPUT,
    load_test_set,
    measure,
    throughput_greedy,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--max-tokens", type=int, default=2500)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ct2-dir", default="bench/.ct2")
    args = p.parse_args()
    steady_allocator()
    torch.set_num_threads(args.threads)
    model, tokenizer, batches, references = load_test_set(
        args.model_dir, args.sentences, args.batch
    )
    # the weights in plain nn.Linear layers (no prepacked oneDNN float32 weights, which a
    # dtype cast would not convert)
    plain = build_model(model.config).eval()
    plain.load_state_dict(model.state_dict())
    bf16 = build_model(model.config).eval().to(torch.bfloat16)
    bf16.load_state_dict(model.state_dict())
    ct2_dirs = ct2_peer.build(Path(args.model_dir), Path(args.ct2_dir))
    import ctranslate2

    supported = ctranslate2.get_supported_compute_types("cpu")
    ct2 = {
        kind: CT2(ct2_dirs["float32"], kind, args.threads, tokenizer)
        for kind in ("float32", "bfloat16")
        if kind in supported
    }

    def autocast_greedy(model, s):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return throughput_greedy(model, s, args.max_tokens)

    rows = {
        f"aiayn float32 {THROUGHPUT}": lambda s: throughput_greedy(model, s, args.max_tokens),
        f"aiayn bf16 weights {THROUGHPUT}": lambda s: throughput_greedy(bf16, s, args.max_tokens),
        f"aiayn bf16 autocast {THROUGHPUT}": lambda s: autocast_greedy(plain, s),
    }
    for kind, translator in ct2.items():
        rows[f"CTranslate2 {kind} {THROUGHPUT}"] = lambda s, t=translator: t(
            pad([[x for x in row if x != PAD] for b in s for row in b.tolist()]),
            1,
            args.max_tokens,
        )
    results = measure(rows, batches, args.repeats, tokenizer, references)
    base = f"aiayn float32 {THROUGHPUT}"
    for r in results.values():
        r["speed_vs_aiayn_float32"] = round(
            r["tokens_per_cpu_s"] / results[base]["tokens_per_cpu_s"], 3
        )
    print(f"{'decoder':<52} {'tok/CPU s':>10} {'x fp32':>7} {'BLEU':>6}")
    for name, r in results.items():
        print(f"{name:<52} {r['tokens_per_cpu_s']:>10.0f} {r['speed_vs_aiayn_float32']:>7.2f} "
              f"{r['bleu']:>6.2f}")  # fmt: skip
    write_result(
        "bf16_decode",
        {
            "model_dir": args.model_dir,
            "sentences": sum(len(b) for b in batches),
            "max_tokens": args.max_tokens,
            "threads": args.threads,
            "repeats": args.repeats,
            "results": results,
            "ctranslate2_cpu_compute_types": sorted(supported),
        },
    )


if __name__ == "__main__":
    main()
