"""Beam search through the CTranslate2 engine (bench/ct2_beam.py): the torch engine, the
ctranslate2 engine and CTranslate2 itself on the same batches, and `aiayn translate` with each."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "Beam search through the CTranslate2 engine"
INTRO = (
    "`bench/ct2_beam.py`: the same batches through the torch engine's exact beam search, "
    "the ctranslate2 engine and CTranslate2's `translate_batch` on the same converted "
    "model and threads, timed in turn in one process (median of the repeats); then "
    "`aiayn translate` with each engine."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "ct2_beam"), lambda r: (r["model_dir"], r["beam"])):
        inner, cli = record["in_process"], record["cli_seconds"]
        seconds = inner["seconds"]
        rows = [
            ["torch engine (`search`, exact beam search)", num(seconds["torch"], 2)],
            ["ctranslate2 engine (`CTranslate2Engine.search`)", num(seconds["ctranslate2"], 2)],
            ["CTranslate2 directly (`translate_batch`, its defaults)", num(seconds["direct"], 2)],
        ]
        cli_rows = [[f"`aiayn translate --engine {k}`", num(v, 2)] for k, v in cli.items()]
        parts.append(
            f"`{record['model_dir']}`, beam {record['beam']}, length penalty 0.6, "
            f"{record['sentences']} test sentences in {inner['batches']} batches:\n\n"
            + provenance(record, "bench/ct2_beam.py")
            + "\n\n"
            + table(["decoder, same batches, one process", "seconds"], rows, {1})
            + "\n\n"
            + f"The ctranslate2 engine: {inner['ct2_engine_over_torch_speed']:.2f}x the torch "
            f"engine's speed, {inner['ct2_engine_time_over_direct']:.2f}x CTranslate2's own "
            f"time; its best hypothesis is the torch engine's on {inner['same_best_as_torch']} "
            f"of {record['sentences']} sentences ({pct(inner['same_best_share'])})"
            + (
                f" at patience {inner['patience']:g}; by patience: "
                + "; ".join(
                    f"{k}: {v['same_best_as_torch']} the same, {num(v['seconds'], 2)} s"
                    for k, v in inner["by_patience"].items()
                )
                if "by_patience" in inner
                else ""
            )
            + ".\n\n"
            + f"The command line on the first {record['cli_sentences']} sentences, each a "
            "process of its own (start-up, loading and the cache's check included):\n\n"
            + table(["command (--beam " + str(record["beam"]) + ")", "seconds"], cli_rows, {1})
        )
    return "\n\n".join(parts)
