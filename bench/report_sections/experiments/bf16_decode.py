"""Experiment: greedy decoding with oneDNN's bf16 products against float32 and CTranslate2
(bench/experiments/bf16_decode.py)."""

from __future__ import annotations

from pathlib import Path

from ..common import latest, num, provenance, table

TITLE = "bfloat16 decoding"
INTRO = (
    "What oneDNN's bf16 products give to greedy decoding on a CPU with bf16 units, "
    'against CTranslate2\'s `compute_type="bfloat16"`, and what they cost in BLEU.'
)


def render(results: Path) -> str:
    r = latest(results, "bf16_decode")
    if r is None:
        return ""
    rows = [
        [name, num(x["tokens_per_cpu_s"]), f"{x['speed_vs_aiayn_float32']:.2f}x", num(x["bleu"], 2)]
        for name, x in r["results"].items()
    ]
    return (
        provenance(r, "bench/experiments/bf16_decode.py")
        + f"\n\n`{r['model_dir']}`, {num(r['sentences'])} test sentences, greedy, "
        f"{r['threads']} thread(s), median of {r['repeats']}"
        + (
            f" (CTranslate2's CPU compute types here: {', '.join(types)}; no bfloat16)"
            if (types := r.get("ctranslate2_cpu_compute_types")) and "bfloat16" not in types
            else ""
        )
        + ":\n\n"
        + table(["decoder", "tokens per CPU s", "vs aiayn float32", "BLEU"], rows, {1, 2, 3})
    )
