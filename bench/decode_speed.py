"""Decoding speed: greedy and beam search, with the KV cache vs recomputing the prefix, and
against Hugging Face MarianMTModel.generate holding the same weights (bench/peers.py).

    python bench/decode_speed.py [MODEL_DIR] [--sentences 200] [--threads 1] [--repeats 3]

Runs on the test split of the model's corpus, every decoder timed in turn, median of the
repeats after a warm-up; prints a table and appends a record to
bench/results/decode_speed.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.config import DataConfig  # noqa: E402
from aiayn.data.batching import pad  # noqa: E402
from aiayn.data.parallel import load_texts  # noqa: E402
from aiayn.data.tokenizer import BOS, EOS, PAD, Tokenizer  # noqa: E402
from aiayn.infer.beam import beam_decode, beam_search  # noqa: E402
from aiayn.infer.greedy import greedy_decode  # noqa: E402
from aiayn.infer.sampling import row_generators, sample_decode  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import write_result  # noqa: E402
from peers import marian_from  # noqa: E402


@torch.no_grad()
def greedy_no_cache(model, src, max_len_offset=50):
    """Greedy search that re-runs the decoder over the whole prefix at every step."""
    memory, src_mask = model.encode(src)
    b = src.size(0)
    limit = int((src != PAD).sum(1).max()) + max_len_offset
    tokens = torch.full((b, 1), BOS, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    for _ in range(limit):
        nxt = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1, keepdim=True)
        nxt = nxt.masked_fill(done[:, None], PAD)
        tokens = torch.cat([tokens, nxt], 1)
        done |= nxt[:, 0] == EOS
        if done.all():
            break
    return tokens[:, 1:]


@torch.no_grad()
def beam_no_cache(model, src, beam=4, alpha=0.6, max_len_offset=50):
    """Beam search that re-runs the decoder over every beam's whole prefix at each step."""
    b = src.size(0)
    memory, src_mask = model.encode(src)
    held = {  # rows follow the beams; finished sentences leave
        "memory": memory.repeat_interleave(beam, dim=0),  # (B*K, S, D)
        "mask": src_mask.repeat_interleave(beam, dim=0),
    }

    def step(tokens):
        held["prefix"] = torch.cat([held["prefix"], tokens], 1) if "prefix" in held else tokens
        logits = model.decode(held["prefix"], held["memory"], held["mask"])[:, -1]  # (N*K, V)
        return torch.log_softmax(logits.float(), dim=-1)

    def reorder(index):
        for name in held:
            held[name] = held[name].index_select(0, index)

    max_len = (src != PAD).sum(1) + max_len_offset
    return beam_search(step, reorder, b, beam, max_len, alpha, 1, src.device)


def marian_generate(peer, src, beam, max_len_offset=50):
    """MarianMTModel.generate with the same limits (HF's length penalty is len**alpha)."""
    out = peer.model.generate(
        input_ids=src,
        attention_mask=src != PAD,
        num_beams=beam,
        length_penalty=0.6,
        do_sample=False,
        max_new_tokens=int((src != PAD).sum(1).max()) + max_len_offset,
    )
    return out[:, 1:]  # without the decoder start token


def generated_tokens(out) -> int:
    """Tokens each sentence generated, up to and including its first eos.

    Decoders pad finished sentences differently (aiayn with pad, MarianMTModel.generate with
    eos when beams finish at different lengths), so the padding is never counted.
    """
    if not torch.is_tensor(out):  # n-best lists: the best hypothesis's tokens
        return sum(len(h[0].tokens) for h in out)
    is_eos = out == EOS
    first_eos = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, out.size(1))  # (B,)
    real = (out != PAD) & (torch.arange(out.size(1))[None, :] < first_eos[:, None])
    return int(real.sum())


def load_test_batches(model_dir, sentences: int, batch: int):
    """(model, padded source batches) of the first ``sentences`` of the model's test split."""
    model = load_model_dir(model_dir)
    tokenizer = Tokenizer.load(Path(model_dir))
    run = json.loads((Path(model_dir) / "run.json").read_text())
    data = DataConfig(corpus=run["data"]["corpus"])
    texts = [s for s, _ in load_texts(data, "test")[:sentences]]
    ids = [x + [EOS] for x in tokenizer.encode(texts)]
    return model, [pad(ids[i : i + batch]) for i in range(0, len(ids), batch)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timings per decoder (median)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, batches = load_test_batches(args.model_dir, args.sentences, args.batch)

    def run_all(fn):
        start = time.perf_counter()
        produced = 0
        for src in batches:
            produced += generated_tokens(fn(src))
        return produced / (time.perf_counter() - start)

    peer = marian_from(model)
    rows = {
        "greedy, KV cache": lambda s: greedy_decode(model, s),
        "greedy, no cache": lambda s: greedy_no_cache(model, s),
        "greedy, Marian": lambda s: marian_generate(peer, s, 1),
        "sampling T=1, KV cache": lambda s: sample_decode(
            model, s, 1.0, generators=row_generators(0, range(len(s)))
        ),
        "beam 4, KV cache": lambda s: beam_decode(model, s, beam=4),
        "beam 4 early stop, KV cache": lambda s: beam_decode(model, s, beam=4, early_stop=True),
        "beam 4, no cache": lambda s: beam_no_cache(model, s, beam=4),
        "beam 4, Marian": lambda s: marian_generate(peer, s, 4),
    }
    for fn in rows.values():
        run_all(lambda s, fn=fn: fn(s[:2]))  # warm-up
    rates = {name: [] for name in rows}
    for _ in range(args.repeats):  # alternate, so drift hits every decoder alike
        for name, fn in rows.items():
            rates[name].append(run_all(fn))
    results = {name: statistics.median(r) for name, r in rates.items()}
    print(f"{'decoding':<28} {'tokens/s':>10}")
    for name, tps in results.items():
        print(f"{name:<28} {tps:>10.0f}")
    speedup = results["greedy, KV cache"] / results["greedy, no cache"]
    print(f"KV cache speed-up (greedy): {speedup:.2f}x")
    vs_marian = {
        "greedy": results["greedy, KV cache"] / results["greedy, Marian"],
        "beam 4": results["beam 4, KV cache"] / results["beam 4, Marian"],
        # HF's default stopping rule is the early-stop heuristic: the like-for-like pair
        "beam 4 early stop": results["beam 4 early stop, KV cache"] / results["beam 4, Marian"],
    }
    print("vs MarianMTModel.generate: " + ", ".join(f"{k} {v:.2f}x" for k, v in vs_marian.items()))
    path = write_result(
        "decode_speed",
        {
            "model_dir": args.model_dir,
            "sentences": sum(len(src) for src in batches),
            "batch": args.batch,
            "tokens_per_s": results,
            "kv_cache_speedup_greedy": speedup,
            "speedup_vs_marian": vs_marian,
            "threads": torch.get_num_threads(),
            "repeats": args.repeats,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
