"""Terminology (bench/terminology.py): a glossary's terms used by plain beam search, by
rewriting the output or the source, and by constrained beam search; placeholders kept."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "Terminology"
INTRO = (
    "`bench/terminology.py`: the Ding test sentences whose reference holds a dictionary "
    "translation of one of their words (from the corpus's phrase entries), translated four "
    "ways with beam 4 on the same sentences, timed in CPU seconds round after round; and UI "
    "strings made from test sentences, one placeholder each ([decoding.md](decoding.md#terms-"
    "a-translation-must-use): the feature). CPU time on a machine shared with other work "
    "moves by more than its wall time's usual 25%: compare the runs of one table."
)

RUNS = ("plain", "output rewriting", "source rewriting", "glossary")
NAMES = {
    "plain": "plain beam 4",
    "output rewriting": "the plain output rewritten (LibreTranslate's glossary)",
    "source rewriting": "the source rewritten before translating",
    "glossary": "the glossary at decode time (constrained beam search)",
}


def render(results: Path) -> str:
    parts = []
    for record in latest_by(
        load(results, "terminology"), lambda r: (r["model_dir"], r["beam"], r["threads"])
    ):
        runs = record["runs"]
        rows = [
            [
                NAMES[name],
                pct(runs[name]["term_use"]),
                num(runs[name]["bleu"], 2),
                num(runs[name]["chrf"], 2),
                num(runs[name]["sentences_per_cpu_s"], 1),
            ]
            for name in RUNS
        ]
        hits = ", ".join(f"{n}: {c}" for n, c in record["glossary_hits_per_sentence"].items())
        ui = record["placeholders"]
        ui_rows = [[name, f"{v['kept']} of {record['ui_strings']}"] for name, v in ui.items()]
        parts.append(
            f"`{record['model_dir']}`, {record['sentences']} of the first "
            f"{record['sentences_scanned']} test sentences, {record['terms']} terms, a glossary "
            f"of {record['glossary_entries']} entries (glossary terms found per sentence, "
            f"sentences: {hits}); {record['threads']} thread(s):\n\n"
            + provenance(record, "bench/terminology.py")
            + "\n\n"
            + table(
                ["run", "term use", "BLEU", "chrF", "sentences per CPU second"], rows, {1, 2, 3, 4}
            )
            + "\n\n"
            + f"The glossary at decode time took {record['glossary_over_plain_time']:.2f}x "
            "plain beam 4's CPU time. BLEU: `"
            + record["bleu_signature"]
            + "`.\n\n"
            + table(["UI strings, beam 4", "placeholders kept verbatim"], ui_rows, {1})
        )
    return "\n\n".join(parts)
