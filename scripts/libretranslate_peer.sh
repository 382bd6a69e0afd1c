#!/usr/bin/env bash
# LibreTranslate as a peer for bench/serve_load.py --peers, entirely offline:
#   - its own virtual environment, .venv-lt/ (gitignored), with libretranslate and
#     argos-translate-lt from PyPI, constrained by constraints-cpu.txt (no torch is pulled:
#     LibreTranslate decodes with CTranslate2), and spaCy for the sentencizer the package holds;
#   - aiayn's own Argos package of MODEL (`aiayn export MODEL --format argos`), installed into
#     runs/lt/packages, with a package index of that one package on the local disk
#     (runs/lt/index/index.json), so that LibreTranslate's start-up finds what it looks for
#     without reaching the network;
#   - wrk, the load generator (Debian's package), where it is missing and this runs as root.
# It prints the environment the bench starts LibreTranslate with (runs/lt/env). Usage:
#   scripts/libretranslate_peer.sh [MODEL]        (default models/ding-de-en)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-models/ding-de-en}"
PYTHON="${PYTHON:-python3}"
AIAYN_PYTHON="${AIAYN_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$AIAYN_PYTHON" ] || AIAYN_PYTHON="$(command -v python)"
VENV="$ROOT/.venv-lt"
LT="$ROOT/runs/lt"
LIBRETRANSLATE_VERSION=1.9.6
ARGOS_VERSION=1.12.1

# wrk, the load generator bench/serve_load.py takes where installed (Debian's package; as
# root): one C thread sends every client's requests, where Python's threads would take a
# tenth of a 2-core machine from the server measured
if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q wrk >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; } ||
      echo "could not install wrk: bench/serve_load.py will send its load from Python" >&2
  else
    echo "wrk is not installed (apt-get install wrk, as root): bench/serve_load.py will" \
      "send its load from Python" >&2
  fi
fi

if [ ! -x "$VENV/bin/libretranslate" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints-cpu.txt" \
    "libretranslate==$LIBRETRANSLATE_VERSION" "argos-translate-lt==$ARGOS_VERSION" "spacy>=3.8"
fi

mkdir -p "$LT/home" "$LT/index" "$LT/packages"
# argos-translate looks for spaCy's multilingual sentencizer here before it would download
# it; the package's own sentencizer is the one used, so an empty place will do
mkdir -p "$LT/home/cache/argos-translate/spacy/senter/model"
PACKAGE="$LT/$(basename "$MODEL").argosmodel"
PYTHONPATH="$ROOT/src" "$AIAYN_PYTHON" -m aiayn.cli export "$MODEL" --format argos \
  --out "$PACKAGE" --force >/dev/null

cat >"$LT/env" <<EOF
HOME=$LT/home
XDG_DATA_HOME=$LT/home/data
XDG_CONFIG_HOME=$LT/home/config
XDG_CACHE_HOME=$LT/home/cache
ARGOS_PACKAGES_DIR=$LT/packages
ARGOS_PACKAGE_INDEX=file://$LT/index/
ARGOS_CHUNK_TYPE=SPACY
EOF
set -a
# shellcheck disable=SC1091
. "$LT/env"
set +a
"$VENV/bin/python" - "$PACKAGE" "$LT/index/index.json" <<'EOF'
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import argostranslate.package as package

path, index = sys.argv[1], sys.argv[2]
for installed in package.get_installed_packages():  # a fresh copy of the export
    shutil.rmtree(installed.package_path)
package.install_from_path(path)
with zipfile.ZipFile(path) as z:
    name = next(n for n in z.namelist() if n.endswith("/metadata.json"))
    metadata = json.loads(z.read(name))
metadata["links"] = ["file://" + path]
with open(index, "w") as f:
    json.dump([metadata], f)
# LibreTranslate's start-up fetches MiniSBD's sentence splitters for the languages it loads;
# with ARGOS_CHUNK_TYPE=SPACY they are never read (the package's spaCy sentencizer splits):
# empty files where it looks keep it from fetching them
import argostranslate.sbd  # noqa: E402,F401  (sets MiniSBD's cache folder, as in LibreTranslate)
from minisbd import models as minisbd  # noqa: E402

for code in (metadata["from_code"], metadata["to_code"]):
    if code in minisbd.MODELS:
        folder = Path(minisbd.cache_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / os.path.basename(minisbd.MODELS[code])).touch()
print(", ".join(f"{p.from_code}->{p.to_code}" for p in package.get_installed_packages()))
EOF
echo "LibreTranslate $LIBRETRANSLATE_VERSION ready: $VENV/bin/libretranslate, environment in $LT/env"
