#!/usr/bin/env bash
# Package a training run as the shipped model directory: the average of its last K
# checkpoints in float16, with its tokenizer, run config, training log and curves.
#   bash scripts/ship_model.sh RUN_DIR [K] [OUT]     (defaults: 5, models/ding-de-en)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:?usage: ship_model.sh RUN_DIR [K] [OUT]}
K=${2:-5}
OUT=${3:-models/ding-de-en}
AIAYN=${AIAYN:-aiayn}
$AIAYN average "$RUN" --last "$K" --out "$OUT" --fp16 --force
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl"
[ -f "$RUN/curves.png" ] && cp "$RUN/curves.png" "$OUT/curves.png"
du -sh "$OUT"
