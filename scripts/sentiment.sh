#!/usr/bin/env bash
# The sentiment classifiers on the bundled Rotten Tomatoes split: three from-scratch encoders
# that differ in their BPE vocabulary (4k, 8k, 16k), each trained with the General Inquirer
# lexicon as extra one-word examples, then their ensemble against TF-IDF + logistic
# regression on the test split (bench/sentiment.py; needs scikit-learn: pip install -e .[bench]).
#   bash scripts/sentiment.sh [OUT_PREFIX]        (default runs/sentiment-rt)
set -euo pipefail
cd "$(dirname "$0")/.."
AIAYN=${AIAYN:-.venv/bin/aiayn}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/sentiment-rt}
$AIAYN prepare rotten-tomatoes
models=()
for vocab in 4000 8000 16000; do
    $AIAYN train configs/sentiment-rt.toml --out "$OUT-$vocab" --set data.vocab_size=$vocab
    models+=("$OUT-$vocab/model")
done
ensemble=$(IFS=+; echo "${models[*]}")
$PYTHON bench/sentiment.py "${models[@]}" "$ensemble"
