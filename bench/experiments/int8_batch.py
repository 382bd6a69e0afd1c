"""Does a sentence translate the same alone as in its batch? Greedy search on the first test
sentences, once as one batch and once sentence by sentence, for aiayn float32, aiayn int8
and CTranslate2 int8 (same weights); counts the sentences whose output differs.

    python bench/experiments/int8_batch.py [MODEL_DIR] [--sentences 50]

fbgemm's dynamic int8 product quantizes its whole input with one scale, so an int8 row's
rounding depends on the other rows of the batch. Appends a record to
bench/results/int8_batch.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from aiayn.data.batching import pad  # noqa: E402
from aiayn.data.tokenizer import PAD  # noqa: E402
from aiayn.infer.greedy import greedy_decode  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import write_result  # noqa: E402
from decode_speed import CT2, load_test_set, token_lists  # noqa: E402


def differing(decode, src) -> int:
    """Sentences of ``src`` (B, S) whose output alone differs from their output in the batch."""
    together = token_lists(decode(src))
    rows = [[t for t in row if t != PAD] for row in src.tolist()]
    alone = [token_lists(decode(pad([row])))[0] for row in rows]
    return sum(a != b for a, b in zip(alone, together, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--ct2-dir", default="bench/.ct2", help="where converted models go")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer, batches, _ = load_test_set(args.model_dir, args.sentences, args.sentences)
    int8 = load_model_dir(args.model_dir, quantize="int8")
    decoders = {
        "aiayn float32": lambda s: greedy_decode(model, s),
        "aiayn int8": lambda s: greedy_decode(int8, s),
    }
    import ct2_peer

    ct2_dirs = ct2_peer.build(Path(args.model_dir), Path(args.ct2_dir))
    translator = CT2(ct2_dirs["int8"], "int8", 1, tokenizer)
    decoders["CTranslate2 int8"] = lambda s: translator(s, 1)
    counts = {name: differing(fn, batches[0]) for name, fn in decoders.items()}
    n = batches[0].size(0)
    for name, count in counts.items():
        print(f"{name}: {count} of {n} sentences differ alone vs in their batch")
    path = write_result(
        "int8_batch", {"model_dir": args.model_dir, "sentences": n, "differ": counts}
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
