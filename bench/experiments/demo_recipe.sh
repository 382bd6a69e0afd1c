#!/usr/bin/env bash
# The demo recipe's experiments (docs/training.md#the-demo-recipe): one recipe of
# configs/demo-de-en.toml trained for a fixed number of steps on one thread, then its weights
# (the last, best/ and the average of the last 3 checkpoints) scored with sacreBLEU and chrF
# on the valid and test splits, and how much its translations depend on their source.
#
#   bash bench/experiments/demo_recipe.sh NAME STEPS [--set KEY=VALUE ...]
#   bash bench/experiments/demo_recipe.sh sentences-linear 2400 --set 'train.schedule="linear"'
#
# A fixed number of steps, not the 15 minutes, so that runs side by side or on a busy machine
# compare step for step; two runs of one thread each fit the 2 cores. Results: runs/recipes/
# NAME/ (the run) and runs/recipes/NAME.jsonl (one line per weights and split).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1 steps=$2
shift 2
run=runs/recipes/$name
out=runs/recipes/$name.jsonl
mkdir -p runs/recipes
.venv/bin/aiayn train configs/demo-de-en.toml --out "$run" --quiet \
    --set train.max_minutes=0 --set train.max_steps="$steps" --set train.threads=1 \
    --set train.valid_every=300 --set train.checkpoint_every=150 --set train.keep_checkpoints=8 \
    "$@"
.venv/bin/aiayn average "$run" --last 3 --out "$run/avg3" --force > /dev/null
: > "$out"
for weights in model best avg3; do
    for split in valid test; do
        OMP_NUM_THREADS=1 .venv/bin/aiayn evaluate "$run/$weights" --split "$split" --samples 0 \
            --output "$run/$weights.$split.hyp.txt" |
            .venv/bin/python -c "import json, sys; d = json.load(sys.stdin); print(json.dumps(
                {'weights': '$weights', 'split': '$split', 'bleu': d['bleu'], 'chrf': d['chrf']}))" \
                >> "$out"
    done
done
# how much the model reads its source: log P(reference | its source) against
# log P(reference | the next sentence's source), nats per sentence, 200 valid sentences
OMP_NUM_THREADS=1 .venv/bin/python - "$run/model" >> "$out" << 'EOF'
import gzip
import json
import sys

import aiayn

src = gzip.open("data/ding-de-en/valid.de.gz", "rt").read().splitlines()[:200]
ref = gzip.open("data/ding-de-en/valid.en.gz", "rt").read().splitlines()[:200]
model = aiayn.load(sys.argv[1])
own = sum(model.score(src, ref)) / len(src)
other = sum(model.score(src[1:] + src[:1], ref)) / len(src)
print(json.dumps({"weights": "model", "source_gain_nats": round(own - other, 2)}))
EOF
cat "$out"
