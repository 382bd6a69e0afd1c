"""An Argos Translate package fine-tuned on in-domain pairs (bench/finetune_argos.py): BLEU
before and after, by aiayn evaluate and by Argos Translate on the exported packages.
docs/interop.md quotes ``gain_table`` of the latest record (tests/test_docs.py checks it)."""

from __future__ import annotations

from pathlib import Path

from .common import Record, load, num, provenance, table

TITLE = "Fine-tuning an Argos Translate package"
INTRO = (
    "The shipped German -> English model exported as an int8 Argos Translate package, imported, "
    "fine-tuned on the LibreOffice help's training pairs (`configs/finetune-libreoffice.toml`, "
    "`train.init_from` = the import) and exported again; sacreBLEU on the LibreOffice help's "
    "test split before and after. See [interop.md](interop.md#fine-tune-an-argos-translate--"
    "libretranslate-package)."
)


def gain_table(record: Record) -> str:
    """BLEU / chrF before and after the fine-tune: aiayn evaluate's (greedy) and Argos
    Translate's on the two packages."""
    ours, argos = record["aiayn_evaluate"], record["argos"]
    rows = [
        [
            "`aiayn evaluate` (greedy)",
            num(ours["before"]["bleu"], 1),
            num(ours["after"]["bleu"], 1),
            num(ours["before"]["chrf"], 1),
            num(ours["after"]["chrf"], 1),
        ],
        [
            "Argos Translate on the package (int8, beam 4)",
            num(argos["before"]["bleu"], 1),
            num(argos["after"]["bleu"], 1),
            num(argos["before"]["chrf"], 1),
            num(argos["after"]["chrf"], 1),
        ],
    ]
    header = [
        "LibreOffice help test split",
        "BLEU before",
        "BLEU after",
        "chrF before",
        "chrF after",
    ]
    return table(header, rows, {1, 2, 3, 4})


def summary(record: Record) -> str:
    """The fine-tune's size and cost, in one sentence."""
    minutes = record.get("minutes", {})
    total = sum(minutes.values())
    threads = f"{record['threads']} thread{'' if record['threads'] == 1 else 's'}"
    return (
        f"{record['sentences']:,} test sentences; {record['steps']:,} steps of at most "
        f"{record['max_tokens']:,} tokens (peak learning rate {record['lr_scale']:g}), "
        f"{num(record['train_minutes'], 1)} minutes of training on {threads} in "
        f"{record['precision']}; the whole loop {num(total, 1)} minutes wall clock "
        f"(validation perplexity {num(record['aiayn_evaluate']['before']['valid_ppl'], 1)} -> "
        f"{num(record['aiayn_evaluate']['after']['valid_ppl'], 1)})."
    )


def render(results: Path) -> str:
    records = load(results, "finetune_argos")
    if not records:
        return ""
    record = records[-1]
    signature = record["aiayn_evaluate"]["bleu_signature"]
    return (
        provenance(record, "bench/finetune_argos.py")
        + "\n\n"
        + gain_table(record)
        + f"\n\n{summary(record)} sacreBLEU signature: `{signature}`."
    )
