#!/usr/bin/env bash
# The serving page in headless Chromium: installs Debian's chromium and Python playwright when
# missing, serves models/ding-de-en on 127.0.0.1, translates a sentence on the page, checks the
# translation and the attention heatmap, and saves docs/serve.png.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [ ! -x /usr/bin/chromium ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
if ! "$PY" -c "import playwright.sync_api" 2>/dev/null; then
    "$PY" -m pip install --quiet playwright  # the driver only: it drives /usr/bin/chromium
fi
"$PY" scripts/browser_check.py "$@"
