#!/usr/bin/env bash
# What the page's tests (tests/serve/test_browser.py) and scripts/browser_check.py need: Debian's
# chromium (apt, as root) and the Python playwright driver (pip, into the venv), each installed
# only where missing. Exits 1, saying what is missing, where it cannot install them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; } ||
            { echo "could not install chromium (apt-get install chromium)" >&2; exit 1; }
    else
        echo "chromium is not installed (apt-get install chromium, as root)" >&2
        exit 1
    fi
fi
if ! "$PY" -c "import playwright.sync_api" 2>/dev/null; then
    # the driver only: it drives /usr/bin/chromium
    "$PY" -m pip install --quiet -c constraints-cpu.txt playwright ||
        { echo "could not install playwright (pip install playwright)" >&2; exit 1; }
fi
