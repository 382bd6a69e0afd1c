"""Build an offline German-English corpus from Debian packages (see aiayn.data.corpora).

Usage:
    python scripts/prepare_corpora.py ding-de-en [--out data/ding-de-en] [--source FILE]
    python scripts/prepare_corpora.py libreoffice-help-de-en [--out data/libreoffice-help-de-en]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))  # run from a checkout without installing

from aiayn.data.corpora import prepare_ding, prepare_libreoffice_help  # noqa: E402

CORPORA = ("ding-de-en", "libreoffice-help-de-en")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", choices=CORPORA)
    parser.add_argument("--out", type=Path, help="output directory (default: data/CORPUS)")
    parser.add_argument("--seed", type=int, default=1, help="split seed (default: 1)")
    parser.add_argument(
        "--source", type=Path, help="ding-de-en only: a Ding de-en file instead of the Debian one"
    )
    args = parser.parse_args(argv)
    out = args.out or REPO_ROOT / "data" / args.corpus
    if args.corpus == "ding-de-en":
        stats = prepare_ding(out, source=args.source, seed=args.seed)
    else:
        if args.source is not None:
            parser.error("--source is only for ding-de-en")
        stats = prepare_libreoffice_help(out, seed=args.seed)
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
