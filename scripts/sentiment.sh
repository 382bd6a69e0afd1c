#!/usr/bin/env bash
# The sentiment classifiers on the bundled Rotten Tomatoes split: three from-scratch encoders
# that differ in their BPE vocabulary (4k, 8k, 16k), each trained with the General Inquirer
# lexicon as extra one-word examples, then their ensemble against TF-IDF + logistic
# regression on the test split (bench/sentiment.py; needs scikit-learn: pip install -e .[bench]).
# The three train at the same time, one thread each (their logs: OUT_PREFIX-VOCAB.log).
#   bash scripts/sentiment.sh [OUT_PREFIX]        (default runs/sentiment-rt)
set -euo pipefail
cd "$(dirname "$0")/.."
AIAYN=${AIAYN:-.venv/bin/aiayn}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/sentiment-rt}
$AIAYN prepare rotten-tomatoes
mkdir -p "$(dirname "$OUT")"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # a failure stops the other trainings too
start=$(date +%s)
models=() pids=()
for vocab in 4000 8000 16000; do
    OMP_NUM_THREADS=1 $AIAYN train configs/sentiment-rt.toml --out "$OUT-$vocab" --quiet \
        --set data.vocab_size=$vocab --set train.threads=1 >"$OUT-$vocab.log" 2>&1 &
    pids+=($!)
    models+=("$OUT-$vocab/model")
done
for _ in "${pids[@]}"; do
    if ! wait -n; then  # the first to fail stops the script (and, by the trap, the others)
        echo "a training failed; see its log among $OUT-{4000,8000,16000}.log" >&2
        exit 1
    fi
done
echo "trained the three in $(( $(date +%s) - start )) s (wall clock)"
ensemble=$(IFS=+; echo "${models[*]}")
$PYTHON bench/sentiment.py "${models[@]}" "$ensemble"
