#!/usr/bin/env bash
# The serving page in headless Chromium: installs Debian's chromium and Python playwright when
# missing (scripts/browser_setup.sh), serves models/ding-de-en on 127.0.0.1, translates a
# sentence on the page, checks the translation and the attention heatmap, and saves
# docs/serve.png.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/browser_setup.sh
"${PYTHON:-.venv/bin/python}" scripts/browser_check.py "$@"
