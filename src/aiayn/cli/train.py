"""``train``: train (or resume) a model from a TOML run config."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from aiayn.errors import TrainingInterrupted


def add_train(sub) -> None:
    p = sub.add_parser("train", help="train (or resume) a model from a TOML config")
    p.add_argument("config", nargs="?", help="TOML run config (configs/*.toml)")
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME); resumes if present")
    p.add_argument(
        "--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="train the tokenizer and write the token stores into the run directory, then stop",
    )
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> None:
    from aiayn.config import load_run_config
    from aiayn.train.loop import Trainer, train

    run = load_run_config(args.config, args.set or [])
    out = Path(args.out or f"runs/{Path(args.config).stem if args.config else 'run'}")
    if args.prepare_only:
        Trainer(run, out, progress=False, data_only=True).close()
        stores = sorted(p.parent.name for p in (out / "store").glob("*/meta.json"))
        print(json.dumps({"run": str(out), "stores": stores}))
        return
    try:
        summary = train(run, out, progress=not args.quiet)
    except TrainingInterrupted as e:
        command = shlex.join(["aiayn", *args.argv])
        raise TrainingInterrupted(f"{e}; resume with: {command}", e.signal_number) from None
    if summary:  # rank 0 of a torchrun launch, or the only process
        print(json.dumps(summary, indent=2))
