"""Interoperability on real weights (bench/interop.py): the exported shipped model against
transformers and CTranslate2, and all-MiniLM-L6-v2 imported against transformers."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, provenance, table

TITLE = "Interoperability on real weights"
INTRO = (
    "The shipped model exported with `aiayn export --format hf`, against transformers and "
    "CTranslate2; all-MiniLM-L6-v2 imported with `aiayn import` (with `--minilm`)."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "interop"), lambda r: "interop"):
        rows = []
        marian = record.get("marian")
        if marian:
            n = marian["sentences"]
            rows.append(
                [
                    f"shipped model exported: teacher-forced log-probabilities vs transformers, {n} test sentences",
                    f"max difference {marian['max_abs_logprob_diff_transformers']:.1e} "
                    f"(values down to -{marian['max_abs_logprob']:.1f})",
                ]
            )
            same = f"transformers {marian['transformers_beam1_same']}/{n} and {marian['transformers_beam4_same']}/{n}"
            if "ctranslate2_beam1_same" in marian:
                same += (
                    f"; CTranslate2 {marian.get('ctranslate2', '')} "
                    f"{marian['ctranslate2_beam1_same']}/{n} and {marian['ctranslate2_beam4_same']}/{n}"
                )
            rows.append(
                ["the same: greedy / beam-4 translations equal to aiayn's (length penalty 0)", same]
            )
            speed = marian.get("sentences_per_s", {})
            if speed:
                rows.append(
                    [
                        "sentences/s on those sentences, greedy / beam 4",
                        f"aiayn {num(speed.get('aiayn_beam1'))} / {num(speed.get('aiayn_beam4'))}, "
                        f"CTranslate2 {num(speed.get('ct2_beam1'))} / {num(speed.get('ct2_beam4'))}",
                    ]
                )
        minilm = record.get("minilm")
        if minilm:
            rows.append(
                [
                    f"all-MiniLM-L6-v2 imported: mean-pooled embeddings vs transformers' BertModel, {minilm['texts']} texts",
                    f"token ids {minilm['same_token_ids']}/{minilm['texts']} equal, "
                    f"max difference {minilm['max_abs_embedding_diff']:.1e}",
                ]
            )
        parts.append(
            provenance(record, "bench/interop.py") + "\n\n" + table(["check", "result"], rows)
        )
    return "\n\n".join(parts)
