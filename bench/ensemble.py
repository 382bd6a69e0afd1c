"""An ensemble against its members alone: BLEU and chrF (sacreBLEU) on a test split.

    python bench/ensemble.py MODEL_A MODEL_B [--corpus data/ding-de-en] [--beam 1,4]

Translates the corpus's test split with each model alone and with their ensemble
(``aiayn.load([A, B])``: per-step probabilities averaged), greedy and with each beam, and
scores every output against the references with sacreBLEU's BLEU and chrF. Appends a record to
bench/results/ensemble.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_result  # noqa: E402

import aiayn  # noqa: E402
from aiayn.evaluate import bleu_chrf  # noqa: E402


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--corpus", default="data/ding-de-en")
    parser.add_argument("--beam", default="1,4", help="comma-separated beam sizes")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    sources, references = lines(corpus / "test.de.gz"), lines(corpus / "test.en.gz")
    translators = {Path(m).parent.name or m: aiayn.load(m) for m in args.models}
    translators["ensemble"] = aiayn.load(args.models)
    rows = []
    for beam in (int(b) for b in args.beam.split(",")):
        for name, translator in translators.items():
            start = time.perf_counter()
            hypotheses = [t.text for t in translator.translate(sources, beam=beam)]
            seconds = time.perf_counter() - start
            scores = bleu_chrf(hypotheses, references)
            row = {"model": name, "beam": beam, "seconds": round(seconds, 2), **scores}
            print(row, flush=True)
            rows.append(row)
    write_result(
        "ensemble",
        {"models": args.models, "corpus": args.corpus, "sentences": len(sources), "rows": rows,
         "note": args.note},
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
