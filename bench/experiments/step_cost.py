"""The cost of one decoding step against the number of sentences decoded together, for aiayn
and CTranslate2 on the same weights: where a fixed batch's time goes once most of its
sentences have finished.

    python bench/experiments/step_cost.py [MODEL_DIR] [--rows 1,4,20,50] [--repeats 5] [--rounds 3]

Each decoder runs greedy search on ROWS copies of one test sentence for 10 and for 50
steps (CTranslate2 with min and max decoding length both set, aiayn through its KV-cached
``decode``); the difference divided by 40 is the CPU time of one step, free of the
encoder's. A third aiayn row runs the same architecture with d_model 16 and a 100-token
vocabulary: its step is almost all framework overhead (issuing the operators), the floor
that PyTorch eager mode puts under every step whatever the model's size.

Where the rest goes: the "attention skipped" rows run aiayn's step with each attention
product over the cache replaced by its queries and no cache read in before it (the output is
no translation; the step's other work is unchanged), so that the step's time less theirs is
what attention costs inside the step; the "attention alone" row times the six attention
calls of step 30, captured from a real step and repeated back to back, their operands then
hot in the CPU's caches.

Every decoder runs once per round, in turn, ``--rounds`` rounds: the table gives each
decoder's median over rounds, the ratios are per round (median, and the lowest and highest
round), so that a change in the host's load between decoders moves them less. One thread;
glibc keeps freed memory in the process (``common.steady_allocator``).
Appends a record to bench/results/step_cost.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from aiayn.data.tokenizer import BOS, Tokenizer  # noqa: E402
from aiayn.model import attention as attention_module  # noqa: E402
from aiayn.model import build_model  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import median_time, steady_allocator, write_result  # noqa: E402

SENTENCE = "Ich habe heute leider keine Zeit, aber morgen komme ich gerne."
SHORT, LONG = 10, 50


@torch.no_grad()
def aiayn_steps(model, src, steps: int) -> None:
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    state = model.new_state(src_mask)
    token = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    for _ in range(steps):
        token = model.decode(token, memory, state=state)[:, -1:].argmax(-1)  # (B, 1)


@contextlib.contextmanager
def attention_replaced(fn, stream_in: bool = True):
    """Every fused attention call of aiayn's layers goes to ``fn(q, k, v, mask, dropout)``;
    ``stream_in`` False: no cache is read in before it either."""
    original, reading = attention_module.fused_attention, attention_module.STREAM_IN
    attention_module.fused_attention, attention_module.STREAM_IN = fn, stream_in
    try:
        yield
    finally:
        attention_module.fused_attention, attention_module.STREAM_IN = original, reading


def skip_attention(q, k, v, mask, dropout):
    return q  # (B, H, T, Dh), the shape attention returns


@torch.no_grad()
def attention_alone(model, src, step: int = 30, calls: int = 200) -> float:
    """CPU milliseconds of the attention calls of one step (the ``step``-th), each timed
    back to back ``calls`` times on its captured operands: the cost with hot caches."""
    captured = []

    def record(q, k, v, mask, dropout):
        captured.append((q, k, v, mask, dropout))
        return original(q, k, v, mask, dropout)

    original = attention_module.fused_attention
    memory, src_mask = model.encode(src)
    state = model.new_state(src_mask)
    token = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    for i in range(step + 1):
        with attention_replaced(record) if i == step else contextlib.nullcontext():
            token = model.decode(token, memory, state=state)[:, -1:].argmax(-1)
    total = 0.0
    for args in captured:
        repeated = lambda a=args: [original(*a) for _ in range(calls)]  # noqa: E731
        total += median_time(repeated, 3, clock=time.process_time) / calls
    return total * 1e3


def per_step(run, repeats: int) -> float:
    """CPU milliseconds of one step: (time of 50 steps - time of 10) / 40."""
    short, long = (
        median_time(lambda k=k: run(k), repeats, clock=time.process_time) for k in (SHORT, LONG)
    )
    return (long - short) / (LONG - SHORT) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--rows", default="1,4,20,50", help="comma-separated batch sizes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="decoders timed in turn, rounds")
    parser.add_argument("--ct2-dir", default="bench/.ct2", help="where converted models go")
    args = parser.parse_args()
    steady_allocator()  # peers timed in one process: no page faults for each other's frees
    torch.set_num_threads(1)
    rows = [int(r) for r in args.rows.split(",")]
    tokenizer = Tokenizer.load(Path(args.model_dir))
    ids = tokenizer.encode([SENTENCE])[0] + [tokenizer.eos_id]
    pieces = [tokenizer.sp.id_to_piece(t) for t in ids[:-1]]
    model = load_model_dir(args.model_dir)
    c = model.config
    decoders = {
        "aiayn float32": model,
        "aiayn int8": load_model_dir(args.model_dir, quantize="int8"),
        "aiayn, d_model 16 (framework overhead)": build_model(
            c.replace(d_model=16, d_ff=16, vocab_size=100)
        ).eval(),
    }
    import ctranslate2

    import ct2_peer

    translators = {
        f"CTranslate2 {kind}": ctranslate2.Translator(
            str(path), device="cpu", compute_type=kind, intra_threads=1
        )
        for kind, path in ct2_peer.build(Path(args.model_dir), Path(args.ct2_dir)).items()
    }
    skipped = {
        f"{name}, attention skipped": m for name, m in decoders.items() if "d_model" not in name
    }
    rounds: list[dict[str, dict[int, float]]] = []
    for _ in range(args.rounds):
        table: dict[str, dict[int, float]] = {}
        for n in rows:
            for name, m in [*decoders.items(), *skipped.items()]:
                vocab = m.config.source_vocab
                fit = ids if max(ids) < vocab else [4 + t % (vocab - 4) for t in ids]  # no pad
                src = torch.tensor([fit] * n)  # (n, S)
                patch = (
                    attention_replaced(skip_attention, stream_in=False)
                    if name in skipped
                    else contextlib.nullcontext()
                )
                with patch:
                    table.setdefault(name, {})[n] = per_step(
                        lambda k, m=m, s=src: aiayn_steps(m, s, k), args.repeats
                    )
            for name, translator in translators.items():
                batch = [pieces] * n

                def run(k, t=translator, b=batch):
                    t.translate_batch(b, beam_size=1, min_decoding_length=k, max_decoding_length=k)

                table.setdefault(name, {})[n] = per_step(run, args.repeats)
        rounds.append(table)
    names = list(rounds[0])
    table = {
        name: {n: statistics.median(r[name][n] for r in rounds) for n in rows} for name in names
    }
    table["aiayn float32, attention alone (hot caches)"] = {
        n: attention_alone(model, torch.tensor([ids] * n)) for n in rows
    }
    print(f"{'CPU ms per step, rows:':<50}" + "".join(f"{n:>9}" for n in rows))
    for name, by_rows in table.items():
        print(f"{name:<50}" + "".join(f"{by_rows[n]:>9.2f}" for n in rows))
    per_round = {
        kind: {
            n: [r[f"aiayn {kind}"][n] / r[f"CTranslate2 {kind}"][n] for r in rounds] for n in rows
        }
        for kind in ("float32", "int8")
    }
    ratios = {
        kind: {n: statistics.median(v) for n, v in t.items()} for kind, t in per_round.items()
    }
    for kind, by_rows in per_round.items():
        print(
            f"aiayn / CTranslate2 step time, {kind} (median, lowest-highest round): "
            + ", ".join(
                f"{n} rows {statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})"
                for n, v in by_rows.items()
            )
        )
    path = write_result(
        "step_cost",
        {
            "model_dir": args.model_dir,
            "repeats": args.repeats,
            "rounds": args.rounds,
            "cpu_ms_per_step": {
                name: {str(n): v for n, v in t.items()} for name, t in table.items()
            },
            "aiayn_over_ct2": {k: {str(n): v for n, v in t.items()} for k, t in ratios.items()},
            "aiayn_over_ct2_rounds": {
                k: {str(n): v for n, v in t.items()} for k, t in per_round.items()
            },
            "versions": {"ctranslate2": ctranslate2.__version__},
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
