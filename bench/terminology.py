"""Terminology: does a translation use the glossary's terms, four ways.

    python bench/terminology.py [MODEL_DIR] [--sentences 1000] [--repeats 1] [--threads 2]

The test set is built from the model's corpus (data/NAME, the Ding dictionary's sentences):
a test sentence is kept when its reference holds a dictionary translation of one of its
source words, from the corpus's phrase entries (a one-word German entry; the English side
found in the reference, ignoring case, on word boundaries; both of 3 letters or more and
different; neither among the 150 most frequent words of its side of the training split); up
to two such terms a sentence, the rarest source words first. The glossary is those entries,
one target per source term (a source term seen with two targets is left out).

Four runs, beam 4, on the same sentences, timed in CPU seconds (``time.process_time``: a
machine shared with other work moves wall time more), round after round in one process after
a warm-up, on ``--threads`` threads (default 1), the median of ``--repeats`` rounds:
``plain`` (no glossary); ``output rewriting`` (the plain output with every glossary source
term the source holds replaced, as a substring ignoring case, by its target: what
LibreTranslate's glossary does); ``source rewriting`` (each source term replaced in the
source by its target before translating); ``glossary`` (``Translator.translate(...,
glossary=...)``: constrained beam search). Scored: term use (the share of the test terms
whose target is in the output, ignoring case, on word boundaries), sacreBLEU and chrF against
the references, sentences per second. (The glossary holds every test term, so a sentence may
hold more of its terms than its own: the constraints each sentence gets are recorded.)

Placeholders: ``--ui-strings`` test sentences (3 to 12 words) made UI strings with one
placeholder each (``%s``, ``{name}``, ``{0}``, ``<x/>``, ``%(count)d``, ``$VAR`` in turn),
translated with beam 4 plainly and with ``keep=aiayn.PLACEHOLDERS``: a string counts as
kept when every placeholder of its source is in its output verbatim, as many times.

Appends a record to bench/results/terminology.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import steady_allocator, write_result  # noqa: E402

import aiayn  # noqa: E402

WORD = re.compile(r"\w+")


def lines(corpus: Path, name: str) -> list[str]:
    return gzip.decompress((corpus / f"{name}.gz").read_bytes()).decode().splitlines()


def has(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE) is not None


def build(corpus: Path, n: int):
    """(sources, references, terms per sentence [(de, en)], glossary {de: en})."""
    de_freq = Counter(w.lower() for s in lines(corpus, "train.de") for w in WORD.findall(s))
    en_freq = Counter(w.lower() for s in lines(corpus, "train.en") for w in WORD.findall(s))
    common_de = {w for w, _ in de_freq.most_common(150)}
    common_en = {w for w, _ in en_freq.most_common(150)}
    entries: dict[str, set[str]] = {}
    for de, en in zip(lines(corpus, "phrases.de"), lines(corpus, "phrases.en"), strict=True):
        if WORD.fullmatch(de) and len(de) >= 3 and len(en) >= 3 and de.lower() != en.lower():
            if en.lower() not in common_en and de.lower() not in common_de:
                entries.setdefault(de.lower(), set()).add(en)
    sources, references = lines(corpus, "test.de")[:n], lines(corpus, "test.en")[:n]
    picked = []
    for src, ref in zip(sources, references, strict=True):
        found = {}
        for word in dict.fromkeys(WORD.findall(src)):
            hits = [en for en in entries.get(word.lower(), ()) if has(ref, en)]
            if hits:
                found[word] = max(hits, key=len)
        rare = sorted(found, key=lambda w: de_freq[w.lower()])[:2]
        picked.append([(w, found[w]) for w in rare])
    targets: dict[str, set[str]] = {}
    for terms in picked:
        for de, en in terms:
            targets.setdefault(de.lower(), set()).add(en.lower())
    glossary = {}
    for terms in picked:
        for de, en in terms:
            if len(targets[de.lower()]) == 1:
                glossary[de.lower()] = en
    keep = [
        i
        for i, terms in enumerate(picked)
        if terms and all(de.lower() in glossary for de, _ in terms)
    ]
    return (
        [sources[i] for i in keep],
        [references[i] for i in keep],
        [picked[i] for i in keep],
        glossary,
    )


TEMPLATES = (  # UI strings from plain sentences: one placeholder each, of every kind in turn
    lambda words: words[:-1] + ["%s" + _end(words[-1])],
    lambda words: words[:1] + ["{name}"] + words[1:],
    lambda words: ["{0}:"] + words,
    lambda words: words[: len(words) // 2] + ["<x/>"] + words[len(words) // 2 :],
    lambda words: ["%(count)d"] + words,
    lambda words: words[:-1] + [_stem(words[-1]), "$VAR" + _end(words[-1])],
)


def _end(word: str) -> str:
    return word[-1] if word[-1] in ".!?" else ""


def _stem(word: str) -> str:
    return word[:-1] if word[-1] in ".!?" else word


def ui_strings(sources: list[str], n: int) -> list[str]:
    """The first ``n`` sources of 3 to 12 words made UI strings, a placeholder in each."""
    picked = [s for s in sources if 3 <= len(s.split()) <= 12][:n]
    return [" ".join(TEMPLATES[i % len(TEMPLATES)](s.split())) for i, s in enumerate(picked)]


def kept(source: str, output: str) -> bool:
    """Every placeholder of ``source`` in ``output`` verbatim, as many times (none lost,
    altered or doubled)."""
    spans = Counter(m.source for m in aiayn.data.terminology.placeholders(source))
    return all(output.count(span) == count for span, count in spans.items())


def rewrite_output(source: str, output: str, glossary: dict[str, str]) -> str:
    """LibreTranslate's way: for each glossary term the source holds, its source form replaced
    by its target wherever the output holds it as a substring (ignoring case)."""
    for de, en in glossary.items():
        if de in source.lower():
            output = re.sub(re.escape(de), en.replace("\\", r"\\"), output, flags=re.IGNORECASE)
    return output


def rewrite_source(source: str, terms: list[tuple[str, str]]) -> str:
    for de, en in terms:
        source = re.sub(rf"(?<!\w){re.escape(de)}(?!\w)", en.replace("\\", r"\\"), source)
    return source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--sentences", type=int, default=1000, help="test sentences scanned")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ui-strings", type=int, default=300, help="UI strings made")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    import sacrebleu

    torch.set_num_threads(args.threads)
    steady_allocator()
    model_dir = Path(args.model_dir)
    corpus = Path("data") / model_dir.name
    sources, references, terms, glossary = build(corpus, args.sentences)
    tr = aiayn.load(model_dir)
    src_lang, tgt_lang = tr.languages
    table = {f"{src_lang}_{tgt_lang}": glossary}
    rewritten = [rewrite_source(s, t) for s, t in zip(sources, terms, strict=True)]
    runs_of = {
        "plain": lambda: tr.translate(sources, beam=4),
        "source rewriting": lambda: tr.translate(rewritten, beam=4),
        "glossary": lambda: tr.translate(sources, beam=4, glossary=table),
    }
    out: dict[str, list[str]] = {}
    times: dict[str, list[float]] = {name: [] for name in runs_of}
    for name, fn in runs_of.items():  # a warm-up, and the outputs
        out[name] = [t.text for t in fn()]
    for _ in range(args.repeats):  # in turn, round after round: the machine's load on each
        for name, fn in runs_of.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    out["output rewriting"] = [
        rewrite_output(s, o, glossary) for s, o in zip(sources, out["plain"], strict=True)
    ]
    seconds["output rewriting"] = seconds["plain"]
    n_terms = sum(len(t) for t in terms)
    runs, bleu, chrf = {}, sacrebleu.BLEU(), sacrebleu.CHRF()
    for name in ("plain", "output rewriting", "source rewriting", "glossary"):
        hyps = out[name]
        used = sum(has(h, en) for h, ts in zip(hyps, terms, strict=True) for _, en in ts)
        runs[name] = {
            "term_use": round(used / n_terms, 4),
            "bleu": round(bleu.corpus_score(hyps, [references]).score, 2),
            "chrf": round(chrf.corpus_score(hyps, [references]).score, 2),
            "cpu_seconds": round(seconds[name], 3),
            "sentences_per_cpu_s": round(len(sources) / seconds[name], 1),
        }
    constraints = [len(tr_terms) for tr_terms in terms]
    found = aiayn.Glossary.from_mapping(table).terms(src_lang, tgt_lang)
    hits = Counter(len(found.find(source)) for source in sources)  # constraints a sentence
    strings = ui_strings(lines(corpus, "test.de"), args.ui_strings)
    ui = {}
    for name, keep in (("plain", None), ("keep placeholders", aiayn.PLACEHOLDERS)):
        start = time.process_time()
        outs = [t.text for t in tr.translate(strings, beam=4, keep=keep)]
        ui[name] = {
            "kept": sum(kept(s, o) for s, o in zip(strings, outs, strict=True)),
            "cpu_seconds": round(time.process_time() - start, 3),
        }
    record = {
        "model_dir": str(model_dir),
        "beam": 4,
        "threads": args.threads,
        "sentences_scanned": args.sentences,
        "sentences": len(sources),
        "terms": n_terms,
        "glossary_entries": len(glossary),
        "terms_per_sentence": dict(sorted(Counter(constraints).items())),
        "glossary_hits_per_sentence": dict(sorted(hits.items())),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "runs": runs,
        "glossary_over_plain_time": round(seconds["glossary"] / seconds["plain"], 2),
        "ui_strings": len(strings),
        "placeholders": ui,
        "note": args.note,
    }
    print(record)
    write_result("terminology", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
