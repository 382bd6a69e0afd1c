#!/usr/bin/env bash
# Set up (if needed), run the default test suite, then the lint and format checks.
# Arguments go to pytest (e.g. -k beam); the checks run only on a full, passing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -q "$@"
if [ "$#" -eq 0 ]; then
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
fi
