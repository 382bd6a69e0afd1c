"""``import`` and ``export``: Hugging Face model directories, both ways; exports to
CTranslate2 and Argos Translate."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiayn.cli.args import fresh_output
from aiayn.errors import UserError


def add_interop(sub) -> None:
    p = sub.add_parser(
        "import",
        help="convert a Hugging Face model (BERT, GPT-2, Marian) into an aiayn model directory",
    )
    p.add_argument("src", help="a local Hugging Face model directory (or a hub name)")
    p.add_argument("--out", required=True, help="the aiayn model directory to write")
    p.add_argument(
        "--force", action="store_true", help="replace the model directory --out holds, whole"
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export", help="write an aiayn model directory in another format")
    p.add_argument("model_dir")
    p.add_argument(
        "--format",
        choices=["hf", "ctranslate2", "argos"],
        default="hf",
        help="hf: a Hugging Face (Marian, BERT, GPT-2) directory; ctranslate2: a CTranslate2 "
        "model directory with its sentencepiece model; argos: an Argos Translate package "
        "(.argosmodel) that Argos Translate and LibreTranslate install",
    )
    p.add_argument("--out", required=True, help="the directory (argos: the file) to write")
    p.add_argument(
        "--quantize", choices=["int8"], help="ctranslate2 / argos: CTranslate2's int8 weights"
    )
    p.add_argument("--from", dest="source_lang", help="argos: source language code (run.json's)")
    p.add_argument("--to", dest="target_lang", help="argos: target language code (run.json's)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the model directory (argos: the package file) --out holds, whole",
    )
    p.set_defaults(func=cmd_export)


def cmd_import(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import import_hf

    summary = import_hf(args.src, Path(args.out), force=args.force)
    print(json.dumps(summary, indent=2))


def cmd_export(args: argparse.Namespace) -> None:
    model_dir, out = Path(args.model_dir), Path(args.out)
    if args.format == "argos":  # one file
        if out.exists() and not (out.is_file() and args.force):
            what = "exists; choose another or add --force" if out.is_file() else "is a directory"
            raise UserError(f"--out {out} {what}")
    else:
        fresh_output(out, args.force, keep=[model_dir])
    if args.format != "argos" and (args.source_lang or args.target_lang):
        raise UserError("--from and --to are for --format argos")
    if args.format == "hf":
        from aiayn.interop.hf import export_hf

        if args.quantize:
            raise UserError("--quantize is for --format ctranslate2 or argos")
        summary = export_hf(model_dir, out, force=args.force)
    elif args.format == "ctranslate2":
        from aiayn.interop.ctranslate2 import export_ctranslate2

        summary = export_ctranslate2(model_dir, out, args.quantize, force=args.force)
    else:
        from aiayn.interop.argos import export_argos

        summary = export_argos(model_dir, out, args.source_lang, args.target_lang, args.quantize)
    print(json.dumps(summary, indent=2))
