"""Decoding speed: aiayn against CTranslate2 and `MarianMTModel.generate` on the same weights
(bench/decode_speed.py), the latest record for each model and thread count."""

from __future__ import annotations

from pathlib import Path

from .common import Record, load, num, provenance, table

TITLE = "Decoding speed"
INTRO = (
    "aiayn against CTranslate2 (the C++ engine LibreTranslate runs on) and Hugging Face "
    "`MarianMTModel.generate`, all holding the same weights (CTranslate2's from `aiayn "
    "export --format hf` and the stock `ct2-transformers-converter`), every decoder timed "
    "in turn in one process on the same sentences; each sentence may run to its source "
    "length + 50; generated tokens counted per sentence up to and including its first "
    "eos; BLEU of each decoder's own output on those sentences. \"all at once, by "
    'tokens" is throughput mode (the sentences sorted by length into batches of up to '
    "2,500 source tokens)."
)


def render(results: Path) -> str:
    records = [r for r in load(results, "decode_speed") if "by_threads" in r]
    current: dict[tuple, Record] = {}  # (model, threads) -> its latest record
    for record in records:
        for threads in record["by_threads"]:
            current[(record["model_dir"], threads)] = record
    parts = []
    for (model_dir, threads), record in sorted(current.items()):
        run = record["by_threads"][threads]
        rows = [
            [
                name,
                num(row.get("tokens_per_s")),
                num(row.get("tokens_per_cpu_s")),
                num(row.get("bleu"), 2),
                str(row["same_as_aiayn_greedy"]) if "same_as_aiayn_greedy" in row else "",
            ]
            for name, row in run["results"].items()
        ]
        cpu_ratios = run.get("cpu_time_ratios", {})
        ratios = [
            [name, f"{value:.2f}x", f"{cpu_ratios[name]:.2f}x" if name in cpu_ratios else "n/a"]
            for name, value in run["ratios"].items()
        ]
        versions = ", ".join(f"{k} {v}" for k, v in record.get("versions", {}).items())
        parts.append(
            f"`{model_dir}`, {record['sentences']} test sentences in batches of "
            f"{record['batch']}, {threads} thread(s), median of {record.get('repeats', '?')}"
            f" ({versions}):\n\n"
            + provenance(record, "bench/decode_speed.py")
            + "\n\n"
            + table(
                ["decoder", "tokens/s", "tokens per CPU s", "BLEU", "same as aiayn greedy"],
                rows,
                {1, 2, 3, 4},
            )
            + "\n\n"
            + table(["aiayn against its peer", "speed ratio", "CPU-time ratio"], ratios, {1, 2})
        )
    return "\n\n".join(parts)
