"""Beam search through the ctranslate2 engine: its speed against the torch engine and against
CTranslate2 called directly on the same batches, and how often its best hypothesis is the
torch engine's (exact search).

    python bench/ct2_beam.py [MODEL_DIR] [--sentences 1000] [--beam 4] [--repeats 3]

In one process, on the first N sentences of the model's test split, cut into the batches
``aiayn translate`` makes (``length_batches``, 4096 source tokens / beam), each timed in turn
(median of the repeats, after a warm-up): the torch engine's beam search, the ctranslate2
engine's (``CTranslate2Engine.search``: one ``translate_batch`` per batch, patience 2,
rescored with GNMT's penalty), and ``ctranslate2.Translator.translate_batch`` itself on the
same converted model and pieces (beam ``--beam``, length penalty 0.6, CTranslate2's defaults
otherwise: patience 1, ``max_decoding_length`` the batch's longest source + 50). Then the
command line, each run a process of its own: ``aiayn translate MODEL --beam 4`` with each
engine, with and without ``--early-stop``, on the same sentences (the conversion cached
first). Appends a record to bench/results/ct2_beam.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median_time, steady_allocator, write_result  # noqa: E402

from aiayn.data.batching import pad  # noqa: E402
from aiayn.infer.translate import length_batches, search, source_ids  # noqa: E402
from aiayn.interop.ctranslate2 import CTranslate2Engine  # noqa: E402
from aiayn.interop.ctranslate2 import searches as ct2_searches  # noqa: E402
from aiayn.modeldir import load_model_and_tokenizer  # noqa: E402


def test_sentences(model_dir: Path, n: int) -> list[str]:
    corpus = Path("data") / model_dir.name
    lines = gzip.decompress((corpus / "test.de.gz").read_bytes()).decode().splitlines()
    return [line for line in lines if line.strip()][:n]


def in_process(model_dir: Path, texts: list[str], beam: int, repeats: int) -> dict:
    model, tokenizer = load_model_and_tokenizer(model_dir)
    engine = CTranslate2Engine(model_dir, threads=torch.get_num_threads())
    ids, _ = source_ids(model, tokenizer, texts)
    batches = length_batches([len(x) for x in ids], max(4096 // beam, 1))
    tensors = [pad([ids[i] for i in b], model.config.pad_id) for b in batches]
    pieces = [[engine._source(ids[i]) for i in b] for b in batches]

    def torch_engine():
        with torch.inference_mode():
            return [search(model, src, beam, 0.6) for src in tensors]

    def ct2_engine():
        return [engine.search(src, beam, 0.6) for src in tensors]

    def ct2_direct():
        return [
            engine.translator.translate_batch(
                batch,
                beam_size=beam,
                length_penalty=0.6,
                max_decoding_length=max(len(p) for p in batch) + 50,
                max_input_length=0,
                return_end_token=True,
            )  # fmt: skip
            for batch in pieces
        ]

    seconds = {}
    for name, fn in (("torch", torch_engine), ("ctranslate2", ct2_engine), ("direct", ct2_direct)):
        seconds[name] = median_time(fn, repeats=repeats)
        print(f"{name}: {seconds[name]:.2f} s", flush=True)
    ours = [h for out in torch_engine() for h in out]
    theirs = [h for out in ct2_engine() for h in out]
    same = sum(a[0].tokens == b[0].tokens for a, b in zip(ours, theirs, strict=True))
    patience = {}  # what the engine's patience buys: agreement against time
    chosen = ct2_searches.BEAM_PATIENCE
    try:
        for value in (1.0, 1.5, 2.0, 3.0):
            ct2_searches.BEAM_PATIENCE = value
            took = median_time(ct2_engine, repeats=repeats)
            out = [h for batch in ct2_engine() for h in batch]
            agree = sum(a[0].tokens == b[0].tokens for a, b in zip(ours, out, strict=True))
            patience[str(value)] = {"seconds": round(took, 3), "same_best_as_torch": agree}
            print(f"patience {value}: {took:.2f} s, {agree} the same", flush=True)
    finally:
        ct2_searches.BEAM_PATIENCE = chosen
    return {
        "patience": chosen,
        "by_patience": patience,
        "batches": len(batches),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "ct2_engine_over_torch_speed": round(seconds["torch"] / seconds["ctranslate2"], 2),
        "ct2_engine_time_over_direct": round(seconds["ctranslate2"] / seconds["direct"], 2),
        "same_best_as_torch": same,
        "same_best_share": round(same / len(texts), 4),
    }


def command_line(model_dir: Path, texts: list[str], beam: int) -> dict:
    source = "\n".join(texts) + "\n"
    aiayn = [sys.executable, "-m", "aiayn.cli", "translate", str(model_dir), "--beam", str(beam)]
    subprocess.run(
        [*aiayn, "--engine", "ctranslate2"],
        input="Ja.\n",
        text=True,
        capture_output=True,
        check=True,
    )  # fmt: skip  (converts once)
    seconds = {}
    for engine in ("torch", "ctranslate2"):
        for early in ([], ["--early-stop"]):
            start = time.perf_counter()
            subprocess.run([*aiayn, "--engine", engine, *early], input=source, text=True,
                           capture_output=True, check=True)  # fmt: skip
            name = engine + ("+early-stop" if early else "")
            seconds[name] = round(time.perf_counter() - start, 2)
            print(f"aiayn translate --engine {name}: {seconds[name]} s", flush=True)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--cli-sentences", type=int, default=500)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    steady_allocator()
    model_dir = Path(args.model_dir)
    texts = test_sentences(model_dir, args.sentences)
    record = {
        "model_dir": str(model_dir),
        "beam": args.beam,
        "sentences": len(texts),
        "in_process": in_process(model_dir, texts, args.beam, args.repeats),
        "cli_sentences": min(args.cli_sentences, len(texts)),
        "cli_seconds": command_line(model_dir, texts[: args.cli_sentences], args.beam),
        "note": args.note,
    }
    print(record)
    write_result("ct2_beam", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
