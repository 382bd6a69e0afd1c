"""Decoding speed: greedy and beam search, float32 and int8, against CTranslate2 (float32 and
int8) and Hugging Face MarianMTModel.generate holding the same weights (bench/peers.py,
bench/ct2_peer.py).

    python bench/decode_speed.py [MODEL_DIR] [--sentences 200] [--threads 1,2] [--repeats 3]
        [--no-cache-rows] [--no-ct2] [--no-marian]

Runs on the test split of the model's corpus, in fixed batches, every decoder timed in turn
in one process on the same sentences (median of the repeats after a warm-up), each with
the same length limit (source length + 50; a batch's longest source for the peers, which
take one limit per batch). Generated tokens are counted per sentence up to and including
its first eos; BLEU of each decoder's output on those sentences is reported beside its
speed. Rates are given per wall-clock second and per second of the process's CPU time (the
latter is steadier on a machine shared with other work). glibc keeps freed memory in the
process throughout (``common.steady_allocator``), so that no decoder's speed depends on
which one ran before it. Prints a table per thread count and appends a record to
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
from aiayn.evaluate import bleu_chrf  # noqa: E402
from aiayn.infer.beam import beam_decode, beam_search  # noqa: E402
from aiayn.infer.greedy import greedy_decode  # noqa: E402
from aiayn.infer.sampling import row_generators, sample_decode  # noqa: E402
from aiayn.infer.translate import length_batches  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import steady_allocator, write_result  # noqa: E402
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
        **({"length_penalty": 0.6} if beam > 1 else {}),
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
    model, _, batches, _ = load_test_set(model_dir, sentences, batch)
    return model, batches


def load_test_set(model_dir, sentences: int, batch: int):
    """(model, tokenizer, padded source batches, references) of the model's test split."""
    model = load_model_dir(model_dir)
    tokenizer = Tokenizer.load(Path(model_dir))
    run = json.loads((Path(model_dir) / "run.json").read_text())
    data = DataConfig(corpus=run["data"]["corpus"])
    pairs = load_texts(data, "test")[:sentences]
    ids = [x + [EOS] for x in tokenizer.encode([s for s, _ in pairs])]
    batches = [pad(ids[i : i + batch]) for i in range(0, len(ids), batch)]
    return model, tokenizer, batches, [t for _, t in pairs]


def token_lists(out) -> list[list[int]]:
    """Each sentence's generated ids (best hypothesis) up to, not including, its first eos."""
    if not torch.is_tensor(out):
        rows = [h[0].tokens if h else [] for h in out]
    else:
        rows = out.tolist()
    cut = []
    for row in rows:
        row = [t for t in row if t != PAD]
        cut.append(row[: row.index(EOS)] if EOS in row else row)
    return cut


class CT2:
    """A CTranslate2 Translator called on id batches like the other decoders."""

    def __init__(self, path, compute_type: str, threads: int, tokenizer: Tokenizer):
        import ctranslate2

        self.sp = tokenizer.sp
        self.translator = ctranslate2.Translator(
            str(path), device="cpu", compute_type=compute_type, intra_threads=threads
        )

    def __call__(self, src, beam: int, max_tokens: int = 0):
        pieces = [[self.sp.id_to_piece(t) for t in row if t != PAD] for row in src.tolist()]
        results = self.translator.translate_batch(
            pieces,
            beam_size=beam,
            length_penalty=0.6,  # CTranslate2 divides by length ** alpha, like HF
            max_decoding_length=int((src != PAD).sum(1).max()) + 50,
            min_decoding_length=0,
            return_end_token=True,
            # throughput mode: CTranslate2 sorts by length and batches by tokens itself
            max_batch_size=max_tokens,
            batch_type="tokens",
        )
        rows = [[self.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in results]
        width = max(len(r) for r in rows)
        return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def throughput_greedy(model, batches, max_tokens: int):
    """Greedy decoding of all sentences at once in throughput mode (aiayn translate()'s
    batching: sorted by length, batches filled by tokens); outputs in the input order."""
    ids = [[t for t in row if t != PAD] for src in batches for row in src.tolist()]
    out = [None] * len(ids)
    for chunk in length_batches([len(x) for x in ids], max_tokens):
        decoded = greedy_decode(model, pad([ids[k] for k in chunk])).tolist()
        for k, row in zip(chunk, decoded, strict=True):
            out[k] = row
    width = max(len(r) for r in out)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in out], dtype=torch.long)


THROUGHPUT = "all at once, by tokens"  # rows whose decoder takes every sentence in one call


def timed_rows(
    model, model_int8, int8_float_output, peer, ct2, include_no_cache: bool, max_tokens: int
) -> dict:
    rows = {
        "greedy, KV cache": lambda s: greedy_decode(model, s),
        "greedy, int8": lambda s: greedy_decode(model_int8, s),
        "greedy, int8, output projection float32": lambda s: greedy_decode(int8_float_output, s),
        "sampling T=1, KV cache": lambda s: sample_decode(
            model, s, 1.0, generators=row_generators(0, range(len(s)))
        ),
        "beam 4, KV cache": lambda s: beam_decode(model, s, beam=4),
        "beam 4 early stop, KV cache": lambda s: beam_decode(model, s, beam=4, early_stop=True),
        "beam 4 early stop, int8": lambda s: beam_decode(model_int8, s, beam=4, early_stop=True),
    }
    if include_no_cache:
        rows["greedy, no cache"] = lambda s: greedy_no_cache(model, s)
        rows["beam 4, no cache"] = lambda s: beam_no_cache(model, s, beam=4)
    if peer is not None:
        rows["greedy, Marian"] = lambda s: marian_generate(peer, s, 1)
        rows["beam 4, Marian"] = lambda s: marian_generate(peer, s, 4)
    for kind, translator in ct2.items():
        rows[f"greedy, CTranslate2 {kind}"] = lambda s, t=translator: t(s, 1)
        rows[f"beam 4, CTranslate2 {kind}"] = lambda s, t=translator: t(s, 4)
    if max_tokens:
        rows[f"greedy {THROUGHPUT}"] = lambda s: throughput_greedy(model, s, max_tokens)
        rows[f"greedy int8 {THROUGHPUT}"] = lambda s: throughput_greedy(model_int8, s, max_tokens)
        for kind, translator in ct2.items():
            rows[f"greedy {THROUGHPUT}, CTranslate2 {kind}"] = lambda s, t=translator: t(
                pad([[x for x in row if x != PAD] for b in s for row in b.tolist()]),
                1,
                max_tokens,
            )
    return rows


RATIOS = {  # name: (numerator row, denominator row)
    "greedy fp32 / CTranslate2 fp32": ("greedy, KV cache", "greedy, CTranslate2 float32"),
    "greedy int8 / CTranslate2 int8": ("greedy, int8", "greedy, CTranslate2 int8"),
    "beam 4 early stop fp32 / CTranslate2 fp32": (
        "beam 4 early stop, KV cache",
        "beam 4, CTranslate2 float32",
    ),
    "beam 4 early stop int8 / CTranslate2 int8": (
        "beam 4 early stop, int8",
        "beam 4, CTranslate2 int8",
    ),
    f"greedy {THROUGHPUT}: fp32 / CTranslate2 fp32": (
        f"greedy {THROUGHPUT}",
        f"greedy {THROUGHPUT}, CTranslate2 float32",
    ),
    f"greedy {THROUGHPUT}: int8 / CTranslate2 int8": (
        f"greedy int8 {THROUGHPUT}",
        f"greedy {THROUGHPUT}, CTranslate2 int8",
    ),
    "greedy / Marian": ("greedy, KV cache", "greedy, Marian"),
    "beam 4 / Marian": ("beam 4, KV cache", "beam 4, Marian"),
    # HF's default stopping rule is the early-stop heuristic: the like-for-like pair
    "beam 4 early stop / Marian": ("beam 4 early stop, KV cache", "beam 4, Marian"),
    "KV cache speed-up (greedy)": ("greedy, KV cache", "greedy, no cache"),
}


def measure(rows: dict, batches, repeats: int, tokenizer, references) -> dict:
    """Median tokens/s (wall and CPU) and BLEU of every row, timed in turn."""

    def run_all(name, fn):
        wall, cpu = time.perf_counter(), time.process_time()
        outs = [fn(batches)] if THROUGHPUT in name else [fn(src) for src in batches]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        produced = sum(generated_tokens(out) for out in outs)
        return produced / wall, produced / cpu, outs

    for name, fn in rows.items():
        fn([batches[0][:2]] if THROUGHPUT in name else batches[0][:2])  # warm-up
    wall = {name: [] for name in rows}
    cpu = {name: [] for name in rows}
    outputs = {}
    for _ in range(repeats):  # alternate, so drift hits every decoder alike
        for name, fn in rows.items():
            w, c, outs = run_all(name, fn)
            wall[name].append(w)
            cpu[name].append(c)
            outputs[name] = [ids for out in outs for ids in token_lists(out)]
    results = {}
    for name in rows:
        hyps = tokenizer.decode(outputs[name])
        results[name] = {
            "tokens_per_s": statistics.median(wall[name]),
            "tokens_per_cpu_s": statistics.median(cpu[name]),
            "bleu": bleu_chrf(hyps, references)["bleu"],
        }
    reference = outputs.get("greedy, KV cache")
    for name in rows:  # how many sentences each decoder translates exactly as aiayn greedy
        if name.startswith("greedy") and reference is not None:
            same = sum(a == b for a, b in zip(outputs[name], reference, strict=True))
            results[name]["same_as_aiayn_greedy"] = same
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--threads", default="1", help="comma-separated thread counts, e.g. 1,2")
    parser.add_argument("--repeats", type=int, default=3, help="timings per decoder (median)")
    parser.add_argument("--no-cache-rows", action="store_true", help="also time without cache")
    parser.add_argument("--no-ct2", action="store_true", help="leave CTranslate2 out")
    parser.add_argument("--no-marian", action="store_true", help="leave MarianMTModel out")
    parser.add_argument("--ct2-dir", default="bench/.ct2", help="where converted models go")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=2500,
        help="throughput-mode rows: source tokens per batch (0: leave them out)",
    )
    args = parser.parse_args()
    steady_allocator()  # peers timed in one process: no page faults for each other's frees
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads {args.threads!r}: expected comma-separated integers, e.g. 1,2")
    model, tokenizer, batches, references = load_test_set(
        args.model_dir, args.sentences, args.batch
    )
    from aiayn.model.quantize import quantize_int8

    model_int8 = quantize_int8(load_model_dir(args.model_dir))
    int8_float_output = quantize_int8(load_model_dir(args.model_dir), include_output=False)
    peer = None if args.no_marian else marian_from(model)
    ct2_dirs = {}
    if not args.no_ct2:
        import ct2_peer

        ct2_dirs = ct2_peer.build(Path(args.model_dir), Path(args.ct2_dir))
    by_threads = {}
    for n in threads:
        torch.set_num_threads(n)
        ct2 = {kind: CT2(path, kind, n, tokenizer) for kind, path in ct2_dirs.items()}
        rows = timed_rows(
            model, model_int8, int8_float_output, peer, ct2, args.no_cache_rows, args.max_tokens
        )
        results = measure(rows, batches, args.repeats, tokenizer, references)
        ratios = {
            name: results[a]["tokens_per_s"] / results[b]["tokens_per_s"]
            for name, (a, b) in RATIOS.items()
            if a in results and b in results
        }
        cpu_ratios = {
            name: results[a]["tokens_per_cpu_s"] / results[b]["tokens_per_cpu_s"]
            for name, (a, b) in RATIOS.items()
            if a in results and b in results
        }
        print(f"\n{n} thread(s): {sum(len(b) for b in batches)} sentences")
        print(f"{'decoding':<34} {'tokens/s':>9} {'tok/CPU s':>10} {'BLEU':>6}")
        for name, r in results.items():
            print(
                f"{name:<34} {r['tokens_per_s']:>9.0f} {r['tokens_per_cpu_s']:>10.0f} "
                f"{r['bleu']:>6.2f}"
            )
        for name in ratios:
            print(f"{name}: {ratios[name]:.2f}x (CPU time: {cpu_ratios[name]:.2f}x)")
        by_threads[n] = {"results": results, "ratios": ratios, "cpu_time_ratios": cpu_ratios}
    import importlib.metadata as md

    versions = {}
    for package in ("ctranslate2", "transformers"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    path = write_result(
        "decode_speed",
        {
            "model_dir": args.model_dir,
            "sentences": sum(len(src) for src in batches),
            "batch": args.batch,
            "repeats": args.repeats,
            "by_threads": by_threads,
            "versions": versions,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
