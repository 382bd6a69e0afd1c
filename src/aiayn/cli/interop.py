"""``import`` and ``export``: Hugging Face model directories, both ways."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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
    p.add_argument("--format", choices=["hf"], default="hf", help="hf: Hugging Face")
    p.add_argument("--out", required=True, help="the directory to write")
    p.add_argument(
        "--force", action="store_true", help="replace the model directory --out holds, whole"
    )
    p.set_defaults(func=cmd_export)


def cmd_import(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import import_hf

    summary = import_hf(args.src, Path(args.out), force=args.force)
    print(json.dumps(summary, indent=2))


def cmd_export(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import export_hf

    summary = export_hf(Path(args.model_dir), Path(args.out), force=args.force)
    print(json.dumps(summary, indent=2))
