"""Target prefixes (bench/prefix.py): what translating with a target prefix costs against
plain translation and the prefixes' teacher-forced pass."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, provenance, table

TITLE = "Target prefixes"
INTRO = (
    "`bench/prefix.py`: `Translator.translate` with and without target prefixes, and the "
    "prefixes' one teacher-forced pass alone, timed in turn in one process."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "prefix"), lambda r: (r["model_dir"], r["beam"])):
        sec, rate = record["seconds"], record["new_tokens_per_s"]
        rows = [
            ["translate, no prefix", num(sec["translate"], 2), num(rate["translate"])],
            ["the prefixes' teacher-forced pass alone", num(sec["prefix_pass"], 2), ""],
            [
                "translate with the prefixes",
                num(sec["translate_with_prefix"], 2),
                num(rate["translate_with_prefix"]),
            ],
        ]
        parts.append(
            f"`{record['model_dir']}`, beam {record['beam']}, {record['sentences']} test "
            f"sentences, the first half of each reference as its prefix "
            f"({record['prefix_tokens']} tokens in all):\n\n"
            + provenance(record, "bench/prefix.py")
            + "\n\n"
            + table(["run", "seconds", "new tokens/s (prefix not counted)"], rows, {1, 2})
            + "\n\n"
            + "Translating with the prefixes took "
            f"{record['with_prefix_over_pass_plus_rest']:.2f}x the prefixes' pass plus the "
            "search of the tokens after them at the plain translation's rate."
        )
    return "\n\n".join(parts)
