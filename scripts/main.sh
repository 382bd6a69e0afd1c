#!/usr/bin/env bash
# The main job. Set up (if needed), then build each preset and print its parameter table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for preset in tiny small base big; do
    .venv/bin/aiayn params "$preset"
    echo
done
