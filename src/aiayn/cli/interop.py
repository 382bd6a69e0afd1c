"""``import`` and ``export``: Hugging Face model directories, both ways; CTranslate2 models and
Argos Translate packages in, and out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiayn.cli.args import fresh_output
from aiayn.errors import UserError


def add_interop(sub) -> None:
    p = sub.add_parser(
        "import",
        help="convert a Hugging Face model (BERT, GPT-2, Marian), a CTranslate2 model or an "
        "Argos Translate package into an aiayn model directory",
    )
    p.add_argument(
        "src",
        help="a Hugging Face model directory (or a hub name), a CTranslate2 model directory "
        "(model.bin) or an Argos Translate package (.argosmodel, or an installed package folder)",
    )
    p.add_argument("--out", required=True, help="the aiayn model directory to write")
    p.add_argument(
        "--tokenizer",
        nargs="+",
        metavar="SPM",
        help="CTranslate2: the sentencepiece model its tokens come from, or a source and a "
        "target model (default: sentencepiece.model, or source.spm and target.spm, beside "
        "model.bin)",
    )
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


def source_kind(src: str) -> str:
    """What ``aiayn import`` reads at ``src``: "argos" (an .argosmodel archive, or a package
    folder: metadata.json and model/model.bin), "ctranslate2" (a folder with model.bin) or
    "hf" (anything else: a Hugging Face folder or hub name)."""
    path = Path(src)
    if path.is_file() and path.suffix == ".argosmodel":
        return "argos"
    if (path / "metadata.json").is_file() and (path / "model" / "model.bin").is_file():
        return "argos"
    if (path / "model.bin").is_file():
        return "ctranslate2"
    return "hf"


def cmd_import(args: argparse.Namespace) -> None:
    kind = source_kind(args.src)
    if args.tokenizer and kind != "ctranslate2":
        what = "an Argos Translate package" if kind == "argos" else "a Hugging Face model"
        raise UserError(f"--tokenizer is for a CTranslate2 model; {args.src} is {what}")
    if args.tokenizer and len(args.tokenizer) > 2:
        raise UserError(
            f"--tokenizer takes one sentencepiece model, or a source and a target one; got "
            f"{len(args.tokenizer)}"
        )
    out = Path(args.out)
    if kind == "ctranslate2":
        from aiayn.interop.ctranslate2.importer import import_ctranslate2

        summary = import_ctranslate2(args.src, out, tokenizer=args.tokenizer, force=args.force)
    elif kind == "argos":
        from aiayn.interop.ctranslate2.importer import import_argos_package

        summary = import_argos_package(args.src, out, force=args.force)
    else:
        from aiayn.interop.hf import import_hf

        summary = import_hf(args.src, out, force=args.force)
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
