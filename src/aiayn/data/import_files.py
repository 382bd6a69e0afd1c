"""A corpus of the user's own files: ``aiayn prepare files --split NAME=...``."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
from pathlib import Path

from aiayn.data.files import iter_jsonl, iter_parallel, iter_tsv
from aiayn.errors import UserError
from aiayn.fileio import atomic_write, read_json_object


def import_files(
    out: Path, specs: list[str], src_lang: str, tgt_lang: str, force: bool = False
) -> dict:
    """``--split NAME=SRC,TGT`` (two aligned files), ``NAME=FILE.tsv`` or ``NAME=FILE.jsonl``
    (Hugging Face translation records) into ``out``.

    The files are streamed (read, checked and compressed a block at a time, so a corpus of any
    size prepares in bounded memory) into temporary files, which take their names only when
    every split has been read without error: a bad line leaves ``out`` as it was. Splits
    already in ``out`` are replaced only with ``force``; a split added to a corpus joins the
    counts in its stats.json.
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
    readers = {}
    for spec in specs:
        name, _, files = spec.partition("=")
        if not name or not files:
            raise UserError(f"--split {spec!r}: expected NAME=SRC,TGT, NAME=FILE.tsv or .jsonl")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise UserError(f"--split {spec!r}: a split name of letters, digits, - or _")
        if name in readers:
            raise UserError(f"--split {name} is given twice; give each split once")
        paths = [Path(p) for p in files.split(",")]
        for path in paths:
            if not path.is_file():
                raise UserError(f"--split {spec!r}: {path} not found")
        if len(paths) == 2:
            readers[name] = (spec, lambda paths=paths: iter_parallel(*paths))
        elif len(paths) == 1 and ".jsonl" in paths[0].suffixes:
            readers[name] = (spec, lambda p=paths[0]: iter_jsonl(p, src_lang, tgt_lang))
        elif len(paths) == 1:
            readers[name] = (spec, lambda p=paths[0]: iter_tsv(p))
        else:
            raise UserError(
                f"--split {spec!r}: give two files (SRC,TGT), one TSV file or one .jsonl file"
            )
    old = read_json_object(out / "stats.json") if (out / "stats.json").is_file() else {}
    # every split is streamed into temporary files first: a bad line anywhere leaves --out
    # as it was; then they take their names
    written, counts, created = [], {}, not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, (spec, read) in readers.items():
            paths = [out / f"{name}.{lang}.gz" for lang in (src_lang, tgt_lang)]
            tmps = [p.with_name(f".{p.name}.tmp-{os.getpid()}") for p in paths]
            written += list(zip(tmps, paths, strict=True))
            counts[name] = _write_pairs(read(), tmps)
            if not counts[name]:
                raise UserError(
                    f"--split {spec!r}: no sentence pairs (every line is blank or has an empty "
                    "side)"
                )
        existing = [path.name for _, path in written if path.exists()]
        if existing and not force:  # checked after reading: a bad file is named first
            raise UserError(
                f"{out} already holds {', '.join(existing)}; add --force to replace them "
                "(or prepare into another --out)"
            )
        for tmp, path in written:
            os.replace(tmp, path)
    finally:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a failed prepare leaves no empty corpus behind
    previous = old.get("pairs") if isinstance(old.get("pairs"), dict) else {}
    stats = {"pairs": {**previous, **counts}}
    text = json.dumps(stats, indent=2) + "\n"
    atomic_write(out / "stats.json", lambda p: p.write_text(text))
    return stats


def _write_pairs(chunks, paths: list[Path]) -> int:
    """Write the pairs of ``chunks`` as two gzip files of lines; return how many."""
    n = 0
    with contextlib.ExitStack() as stack:
        files = [
            stack.enter_context(
                gzip.GzipFile(
                    fileobj=stack.enter_context(open(p, "wb")),
                    mode="wb",
                    filename="",
                    mtime=0,
                    compresslevel=6,
                )
            )
            for p in paths
        ]
        for pairs in chunks:
            for side, f in enumerate(files):
                f.write("".join(pair[side] + "\n" for pair in pairs).encode("utf-8"))
            n += len(pairs)
    return n
