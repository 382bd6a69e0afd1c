#!/usr/bin/env bash
# The default test suite against the lowest versions pyproject.toml admits
# (constraints-lowest.txt), in its own environment (.venv-lowest/, made once). docs/install.md
# records each run. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv-lowest/bin/python ]; then
    "$PY" -m venv .venv-lowest
fi
stamp=.venv-lowest/.aiayn-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-lowest.txt -nt "$stamp" ]; then
    .venv-lowest/bin/python -m pip install --quiet --upgrade pip
    .venv-lowest/bin/python -m pip install --quiet -c constraints-lowest.txt -e ".[dev,hf]"
    touch "$stamp"
fi
.venv-lowest/bin/python -m pip list --format=freeze 2>/dev/null |
    grep -iE '^(torch|transformers|tokenizers|numpy|sentencepiece|fastapi|ctranslate2)==' || true
.venv-lowest/bin/python -m pytest -q "$@"
