"""A corpus of the user's own files: ``aiayn prepare files --split NAME=...``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from aiayn.data.corpora.common import write_parallel
from aiayn.data.files import read_jsonl, read_parallel, read_tsv
from aiayn.errors import UserError, atomic_write, read_json_object


def import_files(
    out: Path, specs: list[str], src_lang: str, tgt_lang: str, force: bool = False
) -> dict:
    """``--split NAME=SRC,TGT`` (two aligned files), ``NAME=FILE.tsv`` or ``NAME=FILE.jsonl``
    (Hugging Face translation records) into ``out``.

    Every file is read before anything is written. Splits already in ``out`` are replaced only
    with ``force``; a split added to a corpus joins the counts in its stats.json.
    """
    if not specs:
        raise UserError(
            "prepare files needs --split NAME=SRC,TGT, NAME=FILE.tsv or NAME=FILE.jsonl"
        )
    for flag, lang in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", lang):
            raise UserError(f"{flag} {lang!r}: a language code of letters, digits, - or _")
    if src_lang == tgt_lang:
        raise UserError(f"--src-lang and --tgt-lang are both {src_lang!r}; they name two files")
    pairs_by_split = {}
    for spec in specs:
        name, _, files = spec.partition("=")
        if not name or not files:
            raise UserError(f"--split {spec!r}: expected NAME=SRC,TGT, NAME=FILE.tsv or .jsonl")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise UserError(f"--split {spec!r}: a split name of letters, digits, - or _")
        if name in pairs_by_split:
            raise UserError(f"--split {name} is given twice; give each split once")
        paths = [Path(p) for p in files.split(",")]
        for path in paths:
            if not path.is_file():
                raise UserError(f"--split {spec!r}: {path} not found")
        if len(paths) == 2:
            pairs = read_parallel(*paths)
        elif len(paths) == 1 and ".jsonl" in paths[0].suffixes:
            pairs = read_jsonl(paths[0], src_lang, tgt_lang)
        elif len(paths) == 1:
            pairs = read_tsv(paths[0])
        else:
            raise UserError(
                f"--split {spec!r}: give two files (SRC,TGT), one TSV file or one .jsonl file"
            )
        if not pairs:
            raise UserError(
                f"--split {spec!r}: no sentence pairs (every line is blank or has an empty side)"
            )
        pairs_by_split[name] = pairs
    targets = [
        out / f"{name}.{lang}.gz" for name in pairs_by_split for lang in (src_lang, tgt_lang)
    ]
    existing = [p.name for p in targets if p.exists()]
    if existing and not force:
        raise UserError(
            f"{out} already holds {', '.join(existing)}; add --force to replace them "
            "(or prepare into another --out)"
        )
    old = read_json_object(out / "stats.json") if (out / "stats.json").is_file() else {}
    for name, pairs in pairs_by_split.items():
        write_parallel(out, name, pairs, src_lang, tgt_lang)
    counts = old.get("pairs") if isinstance(old.get("pairs"), dict) else {}
    stats = {"pairs": {**counts, **{name: len(p) for name, p in pairs_by_split.items()}}}
    text = json.dumps(stats, indent=2) + "\n"
    atomic_write(out / "stats.json", lambda p: p.write_text(text))
    return stats
