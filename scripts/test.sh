#!/usr/bin/env bash
# Set up (if needed), run the default test suite, then the lint and format checks and the
# layers contract of src/aiayn (lint-imports; pyproject's [tool.importlinter]).
# Arguments go to pytest (e.g. -k beam); the checks run only on a full, passing suite.
# The tests run in a random order (pytest-randomly), a new one each time; the seed is printed
# so that a failing order can be replayed: bash scripts/test.sh --randomly-seed=SEED
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
order=()
case " $* " in
*randomly*) ;; # the order is chosen by the arguments (a seed, or -p no:randomly)
*)
    seed=$((RANDOM * 32768 + RANDOM))
    echo "test order: --randomly-seed=$seed"
    order=(--randomly-seed="$seed")
    ;;
esac
.venv/bin/python -m pytest -q "${order[@]}" "$@"
if [ "$#" -eq 0 ]; then
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/lint-imports --no-cache
fi
