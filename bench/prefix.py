"""What a target prefix costs: translating with the first half of each reference as the
prefix, against translating without one, and against one teacher-forced pass over the
prefixes alone.

    python bench/prefix.py [MODEL_DIR] [--sentences 500] [--beam 1] [--repeats 3]

On the first N sentences of the model's test split (German sources, English references), in
one process, each timed in turn (median of the repeats, after a warm-up): ``translate``
without a prefix; the encoder and one decoder pass over bos + prefix for every sentence
(what reading the prefixes costs); ``translate`` with the prefixes. The prefix is read in one
pass and the search goes on from its end, so translating with prefixes should cost about the
pass plus the search of the tokens after them; the record keeps the new tokens' rate
(generated tokens per second, the prefix not counted) of both translations. Appends a record
to bench/results/prefix.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median_time, steady_allocator, write_result  # noqa: E402

import aiayn  # noqa: E402
from aiayn.data.batching import pad  # noqa: E402
from aiayn.infer.translate import length_batches, source_ids  # noqa: E402


def split(corpus: Path, lang: str, n: int) -> list[str]:
    return gzip.decompress((corpus / f"test.{lang}.gz").read_bytes()).decode().splitlines()[:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    steady_allocator()
    model_dir = Path(args.model_dir)
    corpus = Path("data") / model_dir.name
    sources, references = split(corpus, "de", args.sentences), split(corpus, "en", args.sentences)
    prefixes = [" ".join(r.split()[: len(r.split()) // 2]) for r in references]
    tr = aiayn.load(model_dir)
    model, tokenizer, pad_id = tr.model, tr.tokenizer, tr.config.pad_id
    heads = [tokenizer.encode_target([p])[0] if p else [] for p in prefixes]

    def plain():
        return tr.translate(sources, beam=args.beam, scores=False)

    def prefixed():
        return tr.translate(sources, beam=args.beam, scores=False, prefix=prefixes)

    ids, _ = source_ids(model, tokenizer, sources)

    @torch.inference_mode()
    def prefix_pass():  # the encoder, and bos + prefix through the decoder, batched as above
        for batch in length_batches([len(x) for x in ids], 4096 // args.beam):
            src = pad([ids[i] for i in batch], pad_id)
            tgt = pad([[tr.config.bos_id] + heads[i] for i in batch], pad_id)
            model(src, tgt)

    seconds = {
        "translate": median_time(plain, args.repeats),
        "prefix_pass": median_time(prefix_pass, args.repeats),
        "translate_with_prefix": median_time(prefixed, args.repeats),
    }
    generated = sum(len(t.best.tokens) for t in plain())
    after_prefix = sum(
        len(t.best.tokens) - len(h) for t, h in zip(prefixed(), heads, strict=True)
    )  # fmt: skip
    record = {
        "model_dir": str(model_dir),
        "beam": args.beam,
        "sentences": len(sources),
        "prefix_tokens": sum(len(h) for h in heads),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "new_tokens": {"translate": generated, "translate_with_prefix": after_prefix},
        "new_tokens_per_s": {
            "translate": round(generated / seconds["translate"], 1),
            "translate_with_prefix": round(after_prefix / seconds["translate_with_prefix"], 1),
        },
        # translating with prefixes, over the prefix pass plus the search of the rest at the
        # plain translation's rate: <= 1 when the prefix costs no more than one pass
        "with_prefix_over_pass_plus_rest": round(
            seconds["translate_with_prefix"]
            / (seconds["prefix_pass"] + after_prefix / generated * seconds["translate"]),
            2,
        ),
        "note": args.note,
    }
    print(record)
    write_result("prefix", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
