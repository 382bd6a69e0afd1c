#!/usr/bin/env bash
# The main job: set up, prepare the bundled German-English corpus, train the demo model for
# 15 minutes on the CPU, evaluate it on the test split, then evaluate the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
AIAYN=.venv/bin/aiayn
RUN=${RUN:-runs/demo-de-en}

echo "== prepare: the bundled Ding German-English corpus"
$AIAYN prepare ding-de-en

echo "== train: configs/demo-de-en.toml (resumes if $RUN exists)"
$AIAYN train configs/demo-de-en.toml --out "$RUN"

echo "== evaluate: the model just trained (test split, greedy)"
$AIAYN evaluate "$RUN/model" --split test

if [ -f models/ding-de-en/model.safetensors ]; then
    echo "== evaluate: the shipped model models/ding-de-en (test split, greedy)"
    $AIAYN evaluate models/ding-de-en --split test
fi
